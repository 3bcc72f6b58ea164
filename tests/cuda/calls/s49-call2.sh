#!/bin/bash
# Session 49, call 2: the issues' goal rows on an H200 only (an H100 ran them in call 1); on any other card it stops
# at once. Predictions on an H200 as s49-call1.sh's: AWQ 560-575 tok/s (session 37: 557.7, before session 47's
# +1.2 % prefetch), Q4_0 and BF16 within 1 % of session 37's (654.4, 263.4).
# Carry .carry-release.
set -u
. tests/cuda/calls/prelude.sh
case "$GPU" in *H200*) ;; *) el "not an H200: $GPU"; exit 0 ;; esac
goal_rows
el done
