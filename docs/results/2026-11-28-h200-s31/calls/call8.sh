#!/usr/bin/env bash
# Session 31, call 8: the last build's GpuModel and matvec_q8 GPU tests (the new logits-lanes test among
# them), and --deterministic decode against the default on it (8B Q4_0 at 512 and 4096, alternately).
. bench/device_call_env.sh
make_models 8b-Q4_0
export KVTRIE_VALIDATION=0
for t in runner_test_gpu_model kernels_test_matvec_q8; do
  timeout 120 $B/$t --gtest_brief=1 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED TEST|Failure" | head -8
done
wait_models
for c in 512 4096; do
  for round in 1 2; do
    dec $B default 8b-Q4_0 $c --sequences 1
    dec $B deterministic 8b-Q4_0 $c --sequences 1 --deterministic
  done
done
decode_summary
echo done
