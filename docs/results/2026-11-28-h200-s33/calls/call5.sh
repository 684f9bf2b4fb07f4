#!/usr/bin/env bash
# Session 33, call 5: the final build (greedy steps submitted ahead): the table (run_device.sh, the session-12
# settings) and every GPU test binary (run_device.sh's tests step).
. bench/device_call_env.sh
table_on_h200 300
cp /tmp/rd/side_by_side.jsonl /tmp/rd/summary.md /tmp/rd/results.jsonl $OUT/ 2>/dev/null
STEPS=tests timeout 230 bench/run_device.sh $B /tmp/rt > /tmp/rt.out 2>&1; echo "tests rc=$?"
grep -E "^\[|PASSED|FAILED|!!" /tmp/rt/bench.log | grep -vE "^\[ +(RUN|OK) " | tail -40
cp /tmp/rt/bench.log $OUT/gpu_tests.log
echo done
