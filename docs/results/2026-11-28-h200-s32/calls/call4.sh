#!/usr/bin/env bash
# Session 32, call 4 (build with push descriptors): bindings pushed (VK_KHR_push_descriptor, the default
# where offered) against allocated descriptor sets (KVTRIE_PUSH_DESCRIPTORS=0), 8B Q4_0, Q4_K, Q8_0 and 1B
# Q4_0 at 512 and 8B Q4_0 at 4096, alternately, three rounds; sweep-matvec's chained Q4_0 products either way.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0 8b-Q4_K 8b-Q8_0
wait_models
for round in 1 2 3; do
  for m in 8b-Q4_0 1b-Q4_0 8b-Q4_K 8b-Q8_0; do
    KVTRIE_PUSH_DESCRIPTORS=0 dec $B sets $m 512 --sequences 1
    dec $B push $m 512 --sequences 1
  done
done
for round in 1 2; do
  KVTRIE_PUSH_DESCRIPTORS=0 dec $B sets 8b-Q4_0 4096 --sequences 1
  dec $B push 8b-Q4_0 4096 --sequences 1
done
decode_summary
KVTRIE_PUSH_DESCRIPTORS=0 sw $B sets --types Q4_0 --rows-per-lane 1
sw $B push --types Q4_0 --rows-per-lane 1
sweep_summary
for p in 0 1; do
  KVTRIE_PUSH_DESCRIPTORS=$p timeout 60 $B/kvtrie-bench decode --model $M/8b-Q4_0.gguf --context 512 --tokens 64 --sequences 1 --span 2>/dev/null |
    grep '"decode_span' | sed "s/^{/{\"label\":\"push$p\",/"
done
echo done
