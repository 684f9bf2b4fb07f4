#!/usr/bin/env bash
# Session 33, call 4: matvec_q8's norm sums loaded before the weights and summed after them, and the Q/K/V
# product's positions, slots and rope factors read in its first round ($B, the working tree on 7fd2ce0)
# against 7fd2ce0 ($B_OLD), alternately; then the new build's matvec_q8 and GpuModel tests.
. bench/device_call_env.sh
make_models 8b-Q4_0 1b-Q4_0 8b-Q4_K 8b-Q8_0
wait_models
for r in 1 2 3 4; do dec $B_OLD old 8b-Q4_0 512; dec $B new 8b-Q4_0 512; done
for r in 1 2 3; do dec $B_OLD old 1b-Q4_0 512; dec $B new 1b-Q4_0 512; done
for r in 1 2; do for m in 8b-Q4_K 8b-Q8_0; do dec $B_OLD old $m 512; dec $B new $m 512; done; done
for r in 1 2; do dec $B_OLD old 8b-Q4_0 4096; dec $B new 8b-Q4_0 4096; done
dec $B new_profile 8b-Q4_0 512 --profile
dec $B_OLD old_profile 8b-Q4_0 512 --profile
decode_summary
for t in kernels_test_matvec_q8 runner_test_gpu_model; do
  timeout 120 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo "$t rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/$t.log | head -3
done
echo done
