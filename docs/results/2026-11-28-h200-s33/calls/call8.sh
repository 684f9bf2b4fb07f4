#!/usr/bin/env bash
# Session 33, call 8 (b7d5933): the L2 prefetch beside attention in fewer work groups at long contexts (call 7:
# 128 groups led at 4096 in one run): 8B Q4_0 at 2048, 4096 and 8192, the rule (512 groups) against 256 and
# 128, two rounds; Q4_0 1B has no prefetch (the rule's threshold).
. bench/device_call_env.sh
make_models 8b-Q4_0
wait_models
for r in 1 2; do
  for c in 2048 4096 8192; do
    dec $B rule 8b-Q4_0 $c
    for g in 256 128; do dec $B g$g 8b-Q4_0 $c --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups $g; done
  done
done
decode_summary
echo done
