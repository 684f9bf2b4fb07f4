#!/usr/bin/env bash
# Session 31, call 9: the L2 prefetch beside attention (o + 16 MiB, the Q4_0 rule) with 256, 1024 and 2048
# work groups against the rule's 512 (measured on an H100 in session 23, not since on the H200), alternately.
. bench/device_call_env.sh
make_models 8b-Q4_0
wait_models
for round in 1 2 3; do
  dec $B rule 8b-Q4_0 512 --sequences 1
  for g in 256 1024 2048; do
    dec $B g$g 8b-Q4_0 512 --sequences 1 --prefetch-o --prefetch-ffn-mib 16 --prefetch-groups $g
  done
done
decode_summary
echo done
