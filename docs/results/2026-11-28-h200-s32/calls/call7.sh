#!/usr/bin/env bash
# Session 32, call 7 (ba0d3b9): the compute-only queue family against the first family (KVTRIE_QUEUE_FAMILY=
# first) where the table moved most: 8B Q4_0 decode of 8 and 32 sequences at 512 (1,799 -> 2,518 tok/s for 32
# against session 31's table), prefill 512, and one sequence again, alternately; profiles of 32 sequences.
. bench/device_call_env.sh
make_models 8b-Q4_0
wait_models
for round in 1 2; do
  for s in 32 8 1; do
    KVTRIE_QUEUE_FAMILY=first dec $B first 8b-Q4_0 512 --sequences $s
    dec $B cq 8b-Q4_0 512 --sequences $s
  done
done
KVTRIE_QUEUE_FAMILY=first dec $B first-profile 8b-Q4_0 512 --sequences 32 --profile
dec $B cq-profile 8b-Q4_0 512 --sequences 32 --profile
decode_summary
for round in 1 2; do
  for f in first cq; do
    KVTRIE_QUEUE_FAMILY=$f timeout 60 $B/kvtrie-bench prefill --model $M/8b-Q4_0.gguf --prompt 512 2>/dev/null |
      grep '"prefill' | sed "s/^{/{\"label\":\"$f\",/" >> $OUT/prefill.jsonl
  done
done
python3 -c "
import json
for l in open('$OUT/prefill.jsonl'):
    r = json.loads(l); print('prefill 512', r['label'], round(r['tok_s'], 1))"
echo done
