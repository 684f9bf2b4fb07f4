#!/usr/bin/env bash
# Session 31, call 5: call 4 again with its warm runs working (they failed on l2_prefetch's whole-word check):
# the rule against warm, lg4 and both, alternately, four rounds at 512 and two at 4096; the 1B both ways.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for round in 1 2 3 4; do
  dec $B base 8b-Q4_0 512 --sequences 1
  dec $B warm 8b-Q4_0 512 --sequences 1 --warm-attention-inputs
  dec $B lg4 8b-Q4_0 512 --sequences 1 --logits-rows-per-lane 4
  dec $B warm-lg4 8b-Q4_0 512 --sequences 1 --warm-attention-inputs --logits-rows-per-lane 4
done
for round in 1 2; do
  dec $B base 8b-Q4_0 4096 --sequences 1
  dec $B warm 8b-Q4_0 4096 --sequences 1 --warm-attention-inputs
  dec $B lg4 8b-Q4_0 4096 --sequences 1 --logits-rows-per-lane 4
  dec $B warm-lg4 8b-Q4_0 4096 --sequences 1 --warm-attention-inputs --logits-rows-per-lane 4
  dec $B base 1b-Q4_0 512 --sequences 1
  dec $B warm 1b-Q4_0 512 --sequences 1 --warm-attention-inputs
  dec $B lg4 1b-Q4_0 512 --sequences 1 --logits-rows-per-lane 4
  dec $B warm-lg4 1b-Q4_0 512 --sequences 1 --warm-attention-inputs --logits-rows-per-lane 4
done
dec $B warm-lg4-profile 8b-Q4_0 512 --sequences 1 --profile --warm-attention-inputs --logits-rows-per-lane 4
decode_summary
echo done
