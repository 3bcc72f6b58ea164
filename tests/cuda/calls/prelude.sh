# tests/cuda/calls/prelude.sh — what every device-call script from session 37 on starts with (source it from the
# repository root on the GPU machine): the GPU's name in $GPU, .carry-release's bundle unpacked, the environment the
# bundle's programs need, el (a line with the seconds since the start), $B (the programs), $M (a scratch folder in
# memory), $TV (/usr/bin/time -v where the machine has it), bench (hone bench of a model, its figures kept),
# goal_rows (the issues' 8B decode rows through bench), awq_model ($M/awq, an 8B AWQ export) and trace_attention
# (per-block traces of decode steps, summarized; needs .carry-trace carried); engine_ab (hone bench's decode rows
# with HEAD's kernels and this build's, same call; needs .carry-base carried); env_ab (the same for environment
# variants, base among them); ttft_ab (hone bench's TTFT for environment variants).
W=$OUT; T0=$(date +%s); el () { echo "[$(( $(date +%s) - T0 ))s] $*"; }
C=$PWD/.carry-release
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader
tar xJf $C/bundle.tar.xz -C $C || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64 GSETTINGS_BACKEND=memory XDG_CACHE_HOME=/tmp/hc HONE_SOURCE_ROOT=$PWD
B=$C/bin; M=/dev/shm/m; mkdir -p $M
TV=""; [ -x /usr/bin/time ] && TV="/usr/bin/time -v"
bench () {   # tag model: `hone bench -p 64 -n 128 -r 3 -w 1` on cuda:0 into $W/bench-tag.txt
  timeout 90 $TV $B/hone bench -m $2 --device cuda:0 -p 64 -n 128 -r 3 -w 1 > $W/bench-$1.txt 2>&1
  el "bench $1 rc $?"; grep -E "decode \(tok|TTFT|roofline|Maximum resident" $W/bench-$1.txt
}
goal_rows () {   # the issues' H200 decode rows: 8B Q4_0 ($M/q.gguf), BF16 and its RTN AWQ g128 export ($M/awq, as
                 # awq_model makes it), each through bench; the Q4_0 model and the export are kept for later rows
  timeout 120 $B/hone gen-model --shape llama3-8b --type q4_0 -o $M/q.gguf -q; el "gen-model q4_0 rc $?"
  bench q4_0 $M/q.gguf
  timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/b.gguf -q; el "gen-model bf16 rc $?"
  bench bf16 $M/b.gguf
  rm -rf $M/awq
  timeout 100 $B/hone quantize -m $M/b.gguf --rtn -g 128 -f awq -o $M/awq -q; el "rtn awq rc $?"; rm -f $M/b.gguf
  bench awq $M/awq
}
awq_model () {   # $M/awq: the RTN g128 AWQ export of a generated 8B BF16 model, made unless a warm machine kept it
  [ -d $M/awq ] && return
  timeout 120 $B/hone gen-model --shape llama3-8b --type bf16 -o $M/b.gguf -q; el "gen bf16 rc $?"
  timeout 100 $B/hone quantize -m $M/b.gguf --rtn -g 128 -f awq -o $M/awq -q; el "rtn awq rc $?"; rm -f $M/b.gguf
}
trace_attention () {   # variant...: run-trace.sh (carry .carry-trace) into $M/trace, each trace's attention timeline into $W/attn-timeline.txt
  HONE_TRACE_CARRY=.carry-trace OUT=$M/trace bash tests/cuda/run-trace.sh "$@" > $M/trace.log 2>&1
  el "trace rc $?"
  mkdir -p $M/tr && tar xJf $M/trace/traces.tar.xz -C $M/tr 2>/dev/null
  for t in $(find $M/tr -name 'trace-*.csv*' | sort); do
    [ "${t%.xz}" != "$t" ] && xz -dk "$t" && t=${t%.xz}
    echo "== $t" >> $W/attn-timeline.txt
    python3 tests/cuda/trace-summary.py "$t" --attention --timeline >> $W/attn-timeline.txt 2>&1
  done
}
ttft_ab () {   # "variants" tag model prompt...: hone bench's TTFT (-n 32) of each variant (VAR=value, X=1 for
               # none) at each prompt length (session 52 on: HONE_W4_GEMM_TYPES=all was session 51's fused opt-in)
  local vs=$1 tag=$2 m=$3; shift 3
  for p in "$@"; do
    for v in $vs; do
      echo "$tag p=$p [$v]: $(env $v timeout 90 $B/hone bench -m $m --device cuda:0 -p $p -n 32 -r 3 -w 1 2>&1 | grep -E 'TTFT|rror' | head -2 | tr '\n' ' ')"
    done
  done
}
env_ab () {   # tag model prompt "variants" [hone bench args...]: decode tok/s of each variant, two rounds; a variant is
              # base (.carry-base's libhoneall.so: HEAD's kernels, carry it), or VAR=value[,VAR=value...] on this build
  local tag=$1 m=$2 p=$3 vs=$4; shift 4
  for r in 1 2; do
    for v in $vs; do
      local lp=$LD_LIBRARY_PATH e=${v//,/ }
      if [ $v = base ]; then
        [ -e $M/base/libhoneall.so ] || { mkdir -p $M/base && xz -dc .carry-base/libhoneall.so.xz > $M/base/libhoneall.so; }
        lp=$M/base:$LD_LIBRARY_PATH e=X=1
      fi
      echo "$tag p=$p [$v]: $(env $e LD_LIBRARY_PATH=$lp timeout 90 $B/hone bench -m $m --device cuda:0 -p $p -n 128 -r 3 -w 1 "$@" 2>&1 | grep -E 'decode \(tok|rror' | head -2 | tr '\n' ' ')"
    done
  done
}
engine_ab () {   # tag model prompt [hone bench args...]: decode tok/s with .carry-base's libhoneall.so (base), then this build's (X=1); twice
  local tag=$1 m=$2 p=$3; shift 3
  env_ab $tag $m $p "base X=1" "$@"
}
