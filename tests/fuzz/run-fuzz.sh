#!/bin/sh
# run-fuzz.sh BIN SEEDS OUT SECONDS [libFuzzer flags…] — the suite 'fuzz' step of
# one target: every seed of tests/fuzz/corpus-<name> first, then SECONDS of
# fuzzing from them. The seed folder is only read (new inputs go to a scratch
# folder); a crashing input is kept under OUT/ for reproduction with
# `BIN OUT/crash-…`.
set -eu
bin=$1 seeds=$2 out=$3 secs=$4
shift 4
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
exec "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$out/" "$@" "$scratch" "$seeds"
