#!/bin/bash
# tests/cuda/run-step-ab.sh — same-binary A/B of decode-step settings on the GPU
# machine: for each weight type, each environment variant runs the whole-step
# bench of the 8B shape in its own process (Q4_0/Q4_1/Q8_0/BF16:
# hone-cuda-check --decode with the default kernels; AWQ: hone-w4-check
# --bench, its rs rows), variants alternating, ROUNDS rounds; then one table a
# type: ms per variant and context (u = unbounded graph, b = bounded to short
# contexts as the engine captures it up to 2k keys, t = bounded to the tiny
# attention kernel's 256 keys as it captures it up to there), every round's figure.
# Carry C (default .carry-release, from tests/cuda/build-carry.sh).
#   usage: tests/cuda/run-step-ab.sh "Q4_0 AWQ" "X=1" "HONE_NORM_TRIGGER=late" …
#   (a variant is one or more VAR=value separated by spaces, in one argument;
#   "X=1" is the default)         env: ROUNDS (2), HONE_AB_CARRY
# $OUT gets ab-raw.txt (the bench lines) and ab.txt (the tables).
set -u
cd "$(dirname "$0")/../.."
R=${OUT:-/tmp/hone-ab-out}
mkdir -p "$R"
C=${HONE_AB_CARRY:-.carry-release}
case $C in /*) ;; *) C=$PWD/$C ;; esac
[ -d "$C/bin" ] || tar xJf "$C/bundle.tar.xz" -C "$C" || exit 1
export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
types=$1; shift
raw=$R/ab-raw.txt
: > "$raw"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for t in $types; do
    for v in "$@"; do
      echo "== $t | $v | round $round" >> "$raw"
      if [ "$t" = AWQ ]; then
        env $v HONE_W4_STEP_ONLY=1 timeout 90 "$C/bin/hone-w4-check" --bench 2>&1 | grep "decode step\|hash" >> "$raw"
      else
        env $v HONE_DECODE_TYPES="$t" HONE_DECODE_DEFAULT_ONLY=1 timeout 90 "$C/bin/hone-cuda-check" --decode 2>&1 \
          | grep "^decode4" | grep -v "launch shape 0" >> "$raw"
      fi
    done
  done
done
python3 - "$raw" > "$R/ab.txt" <<'EOF'
import collections, re, sys
cur, res, order = None, collections.defaultdict(list), []
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+) \| (.*) \| round \d+", line)
    if m:
        cur = (m.group(1), m.group(2))
        if cur not in order:
            order.append(cur)
        continue
    m = re.search(r"(short-ctx attention|tiny-ctx attention|default \(epiq off\)|default)\s+ctx\s+(\d+):\s+([\d.]+) ms", line)
    if m:
        res[(cur, ("b" if "short" in m.group(1) else "t" if "tiny" in m.group(1) else "u") + m.group(2))].append(float(m.group(3)))
        continue
    m = re.search(r"ctx\s+(\d+) rs( short-ctx| tiny-ctx)?\s*:\s+([\d.]+) ms", line)
    if m:
        g = m.group(2) or ""
        res[(cur, ("b" if "short" in g else "t" if "tiny" in g else "u") + m.group(1))].append(float(m.group(3)))
for t in dict.fromkeys(k[0] for k in order):
    keys = sorted({k[1] for k in res if k[0][0] == t}, key=lambda s: (s[0], int(s[1:])))
    print("%s: ms per step (every round)" % t)
    print("  %-44s %s" % ("variant", "  ".join("%-13s" % k for k in keys)))
    for (tt, v) in order:
        if tt == t:
            print("  %-44s %s" % (v[:44], "  ".join("%-13s" % "/".join("%.3f" % x for x in res[((tt, v), k)])
                                                  for k in keys)))
EOF
cat "$R/ab.txt"
