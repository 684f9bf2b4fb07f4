#!/usr/bin/env bash
# Session 32, call 9 (4e7343e: get_rows' two builds sharing one push block): the GPU tests that run get_rows
# (its kernel test, GpuModel, the engine), and the 8B Q4_0 step once.
. bench/device_call_env.sh
for t in kernels_test_get_rows kernels_test_vk_runtime runner_test_gpu_model runner_test_gpu_engine; do
  timeout 60 $B/$t --gtest_brief=1 > $OUT/$t.log 2>&1; echo "$t rc=$?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/$t.log | head -3
done
make_models 8b-Q4_0
wait_models
dec $B final 8b-Q4_0 512 --sequences 1
decode_summary
echo done
