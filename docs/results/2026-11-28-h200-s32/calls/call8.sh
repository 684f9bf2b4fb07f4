#!/usr/bin/env bash
# Session 32, call 8 (ba0d3b9): attention in splits of 64 together with a smaller L2 prefetch beside it (each
# alone ran as fast as the rules in call 2), 8B Q4_0 at 512 and 4096, alternately, four rounds; the 1B
# (no prefetch) with splits of 64.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0
wait_models
for round in 1 2 3 4; do
  dec $B rule 8b-Q4_0 512 --sequences 1
  dec $B s64-o8 8b-Q4_0 512 --sequences 1 --attention-split 64 --prefetch-o --prefetch-ffn-mib 8
  dec $B s64 8b-Q4_0 512 --sequences 1 --attention-split 64
  dec $B o8 8b-Q4_0 512 --sequences 1 --prefetch-o --prefetch-ffn-mib 8
  dec $B rule 1b-Q4_0 512 --sequences 1
  dec $B s64 1b-Q4_0 512 --sequences 1 --attention-split 64
done
for round in 1 2; do
  dec $B rule 8b-Q4_0 4096 --sequences 1
  dec $B o8 8b-Q4_0 4096 --sequences 1 --prefetch-o --prefetch-ffn-mib 8
done
decode_summary
echo done
