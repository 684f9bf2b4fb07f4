#!/usr/bin/env bash
# Session 30, call 6: what a decode step spends outside the device (decode --span: the device's time from a
# step's start to its end against the host's wall time), 8B Q4_0 at 512 and 4096, 1B Q4_0 at 512.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for round in 1 2 3; do
  dec $B span 8b-Q4_0 512 --sequences 1 --span
  dec $B span 1b-Q4_0 512 --sequences 1 --span
done
dec $B span 8b-Q4_0 4096 --sequences 1 --span
timeout 60 $B/kvtrie-bench decode --model $M/8b-Q4_0.gguf --context 512 --tokens 64 --span 2>/dev/null | grep decode_span >> $OUT/span.jsonl
grep -h decode_span $OUT/decode.jsonl $OUT/span.jsonl 2>/dev/null | cut -c1-300
decode_summary
echo done
