#!/usr/bin/env bash
# Session 31, call 4 (on the reverted kernels, session 29's): small knobs of the 8B Q4_0 step, alternately
# against the rule: attention's small inputs read into L2 beside the Q/K/V product (warm), the logits product
# in 4 rows a lane (lg4: 64-byte writes into host memory a work group instead of 16), attention splits of 64
# with the o weights and 8 MiB prefetched (s64o8), and all three.
. bench/device_call_env.sh
make_models 8b-Q4_0
wait_models
for round in 1 2 3; do
  dec $B base 8b-Q4_0 512 --sequences 1
  dec $B warm 8b-Q4_0 512 --sequences 1 --warm-attention-inputs
  dec $B lg4 8b-Q4_0 512 --sequences 1 --logits-rows-per-lane 4
  dec $B s64o8 8b-Q4_0 512 --sequences 1 --attention-split 64 --prefetch-o --prefetch-ffn-mib 8
  dec $B all 8b-Q4_0 512 --sequences 1 --warm-attention-inputs --logits-rows-per-lane 4 --attention-split 64 --prefetch-o --prefetch-ffn-mib 8
done
for round in 1 2; do
  dec $B base 8b-Q4_0 4096 --sequences 1
  dec $B warm 8b-Q4_0 4096 --sequences 1 --warm-attention-inputs
  dec $B lg4 8b-Q4_0 4096 --sequences 1 --logits-rows-per-lane 4
done
dec $B base-profile 8b-Q4_0 512 --sequences 1 --profile
dec $B all-profile 8b-Q4_0 512 --sequences 1 --profile --warm-attention-inputs --logits-rows-per-lane 4 --attention-split 64 --prefetch-o --prefetch-ffn-mib 8
decode_summary
echo done
