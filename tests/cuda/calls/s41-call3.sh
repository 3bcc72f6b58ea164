#!/bin/bash
# Session 41, call 3 (the same warm H100 as call 2): call 2's racecheck of the chain's checks ran past its 90 s
# bound; this is it alone with 250 s. Prediction: 0 hazards (the walk's shared histogram copy, block scans and tie
# ballots are each behind a barrier). Carry .carry-release.
. tests/cuda/calls/prelude.sh >/dev/null 2>&1
OUT= timeout 250 compute-sanitizer --tool racecheck --print-limit 10 $B/hone-cuda-check --check-sample-rows > $W/rc.txt 2>&1
el "racecheck check-sample-rows rc $?: $(grep -E 'RACECHECK SUMMARY|^checks' $W/rc.txt | tr '\n' '|')"; tail -5 $W/rc.txt
