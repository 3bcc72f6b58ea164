#!/bin/bash
# Session 47, call 2: session 46's call 4 with caps 5 and 4 only (the engine rows, then the traces of the Q4_0 and
# AWQ steps at 4k keys, I against G). Predictions: session 46's call 4. Carry .carry-release and .carry-trace.
# (What ran: call 1's cap-5 rows, then this call's trace_attention line alone, RESULTS-cuda.md "Session 47".)
CAP_VARIANTS="X=1 HONE_ATTN_CAP=5 HONE_ATTN_CAP=4 HONE_ATTN_LONG=G" exec bash tests/cuda/calls/s46-call4.sh
