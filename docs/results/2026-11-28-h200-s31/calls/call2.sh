#!/usr/bin/env bash
# Session 31, call 2: the Q/K/V product handing off to attention without a barrier (c.f. the commit):
#  - the hand-off's GPU tests without the barrier (kernel chain and GpuModel, NVIDIA: concurrent);
#  - 8B Q4_0 decode at 512 and 4096, hand-off against --no-handoff alternately, three rounds; with the
#    hand-off, the L2 prefetch beside attention as the rule has it, o alone, o + 8 MiB, and none;
#  - 8B Q4_K and Q8_0 and 1B Q4_0 at 512, both ways; a profile of the hand-off step.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0 8b-Q4_K 8b-Q8_0
export KVTRIE_VALIDATION=0
timeout 60 $B/kernels_test_matvec_q8 --gtest_brief=1 --gtest_filter='*Handoff*' 2>&1 | grep -vE "^\[20" | tail -8
timeout 60 $B/runner_test_gpu_model --gtest_brief=1 --gtest_filter='*Handoff*' 2>&1 | grep -vE "^\[20" | tail -8
wait_models
for round in 1 2 3; do
  dec $B handoff 8b-Q4_0 512 --sequences 1
  dec $B barrier 8b-Q4_0 512 --sequences 1 --no-handoff
done
for v in "o --prefetch-o --prefetch-ffn-mib 0" "o8 --prefetch-o --prefetch-ffn-mib 8" "none --no-prefetch"; do
  set -- $v; lab=$1; shift
  for round in 1 2; do dec $B handoff-$lab 8b-Q4_0 512 --sequences 1 "$@"; done
done
for round in 1 2; do
  dec $B handoff 8b-Q4_0 4096 --sequences 1
  dec $B barrier 8b-Q4_0 4096 --sequences 1 --no-handoff
done
for m in 8b-Q4_K 8b-Q8_0 1b-Q4_0; do
  for round in 1 2; do
    dec $B handoff $m 512 --sequences 1
    dec $B barrier $m 512 --sequences 1 --no-handoff
  done
done
dec $B handoff-profile 8b-Q4_0 512 --sequences 1 --profile
dec $B handoff-span 8b-Q4_0 512 --sequences 1 --span
decode_summary
grep decode_span $OUT/decode.jsonl | head -3
echo done
