# The test binaries with paths lavapipe lacks, which the GPU machine runs: sourced by pack_device_bin.sh,
# which packs them, and by run_device.sh, whose tests step runs them all.
GPU_TESTS="kernels_test_matmul kernels_test_matvec kernels_test_matvec_q8 kernels_test_attention
  kernels_test_fast_paths kernels_test_tile_decode kernels_test_kv_write kernels_test_weight_format
  kernels_test_op_registry kernels_test_pipeline_cache kernels_test_l2_prefetch kernels_test_argmax_rows kernels_test_top_k_rows
  kernels_test_get_rows
  kernels_test_vk_runtime
  runner_test_gpu_model runner_test_gpu_model_ahead runner_test_gpu_engine"
