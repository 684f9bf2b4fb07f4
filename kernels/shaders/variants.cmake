# One line per shader variant: kvtrie_shader(<op>_<variant> <source>.comp [DEFINE=VALUE...]): the variants of
# the ops' registration rows (kernels/ops/op_registry.h) and the kernels tests' shaders; the benchmarks'
# probes are built by bench/CMakeLists.txt.
kvtrie_shader(fill_f32 fill.comp)
kvtrie_shader(rms_norm_f32 rms_norm.comp)
kvtrie_shader(rms_norm_add_f32 rms_norm.comp ADD_RESIDUAL=1)
kvtrie_shader(rms_norm_f32_f16 rms_norm.comp HALF_OUT=1)
kvtrie_shader(rms_norm_add_f32_f16 rms_norm.comp ADD_RESIDUAL=1 HALF_OUT=1)
kvtrie_shader(norm_input norm_input.comp)
kvtrie_shader(rope_f32 rope.comp)
kvtrie_shader(swiglu_f32 swiglu.comp)
kvtrie_shader(swiglu_f32_f16 swiglu.comp HALF_OUT=1)
kvtrie_shader(convert_f32_f16 convert.comp)
kvtrie_shader(add_f32 add.comp)
kvtrie_shader(l2_prefetch_u32 l2_prefetch.comp)
kvtrie_shader(argmax_rows_f32 argmax_rows.comp)
kvtrie_shader(top_k_rows_f32 top_k_rows.comp)
kvtrie_shader(reduce_splits_f32 reduce_splits.comp)
kvtrie_shader(add_bias_f32 add_bias.comp)
kvtrie_shader(kv_write_f16 kv_write.comp)
kvtrie_shader(kv_write_rope_f16 kv_write.comp ROPE=1)
kvtrie_shader(kv_write_rope_qkv_f16 kv_write.comp ROPE=1 QKV=1)
# get_rows, matvec, matmul: one variant per weight type; WTYPE is the GGML type id, or a device format's id
# (the lists come from base/tensor_types.def, read by cmake/tensor_types.cmake).
foreach(_name ${KVTRIE_TENSOR_TYPES})
  set(_id ${KVTRIE_TYPE_ID_${_name}})
  kvtrie_shader(get_rows_${_name} get_rows.comp WTYPE=${_id})
  kvtrie_shader(matvec_${_name} matvec.comp WTYPE=${_id})
  kvtrie_shader(matvec1_${_name} matvec.comp WTYPE=${_id} SINGLE_TOKEN=1)
  kvtrie_shader(matvec1_swiglu_${_name} matvec.comp WTYPE=${_id} SINGLE_TOKEN=1 SWIGLU=1)
  kvtrie_shader(matmul_${_name} matmul.comp WTYPE=${_id})
  kvtrie_shader(matmul_coopmat_${_name} matmul_coopmat.comp WTYPE=${_id})
  if(KVTRIE_GLSL_KHR_COOPMAT)
    kvtrie_shader(matmul_coopmat_khr_${_name} matmul_coopmat.comp WTYPE=${_id} KHR_COOPMAT=1)
    kvtrie_shader(matmul_coopmat_khr_xh_${_name} matmul_coopmat.comp WTYPE=${_id} KHR_COOPMAT=1 X_F16=1)
  endif()
endforeach()
# The fused products of float weights (matvec.comp's NORM_IN, SWIGLU_OUT, ACCUMULATE builds): one token, and
# batches (--deterministic, batch-invariant with the one-token builds; their normed x from norm_input).
foreach(_name f32 f16 bf16)
  set(_id ${KVTRIE_TYPE_ID_${_name}})
  kvtrie_shader(matvec_norm_${_name} matvec.comp WTYPE=${_id} NORM_IN=1)
  kvtrie_shader(matvec_norm_swiglu_${_name} matvec.comp WTYPE=${_id} NORM_IN=1 SWIGLU_OUT=1)
  kvtrie_shader(matvec_acc_${_name} matvec.comp WTYPE=${_id} ACCUMULATE=1)
  kvtrie_shader(matvec1_norm_${_name} matvec.comp WTYPE=${_id} SINGLE_TOKEN=1 NORM_IN=1)
  kvtrie_shader(matvec1_norm_swiglu_${_name} matvec.comp WTYPE=${_id} SINGLE_TOKEN=1 NORM_IN=1 SWIGLU_OUT=1)
  kvtrie_shader(matvec1_acc_${_name} matvec.comp WTYPE=${_id} SINGLE_TOKEN=1 ACCUMULATE=1)
endforeach()
# The tensor-core matmul through VK_NV_cooperative_matrix2 (SPIR-V 1.6), for the 16-byte aligned formats.
if(KVTRIE_GLSL_NV_COOPMAT2)
  foreach(_name ${KVTRIE_TILED_TYPES})
    set(_id ${KVTRIE_TYPE_ID_${_name}})
    kvtrie_shader(matmul_cm2_${_name} matmul_cm2.comp TARGET_ENV vulkan1.3 WTYPE=${_id})
  endforeach()
endif()
# paged attention: split pass + combine pass.
kvtrie_shader(attention_paged attention.comp)
kvtrie_shader(attention_combine attention_combine.comp)
kvtrie_shader(attention_combine_qout attention_combine.comp QUANT_OUT=1)
kvtrie_shader(attention_combine_f16 attention_combine.comp HALF_OUT=1)
# ... its split pass for decode steps (attention_decode.comp): head_dim 64 and 128 on 32-lane subgroups, and
# any head_dim and subgroup size the host allows.
kvtrie_shader(attention_decode_d64 attention_decode.comp HD=64u SGC=32u)
kvtrie_shader(attention_decode_d128 attention_decode.comp HD=128u SGC=32u)
kvtrie_shader(attention_decode_any attention_decode.comp)
# ... its split pass on tensor cores for prefill blocks (attention_coopmat.comp), per head_dim, with the
# subgroups a work group that measured fastest for it (attention.cpp, coopmat_rows).
if(KVTRIE_GLSL_KHR_COOPMAT)
  kvtrie_shader(attention_coopmat_d64 attention_coopmat.comp HD=64u SG=4u)
  kvtrie_shader(attention_coopmat_d128 attention_coopmat.comp HD=128u SG=8u)
endif()
# The tensor-core matmul's 16-value loader on its own (tests only: checkable without cooperative matrices).
foreach(_name ${KVTRIE_TILED_TYPES})
  set(_id ${KVTRIE_TYPE_ID_${_name}})
  kvtrie_shader(tile_decode_${_name} tile_decode.comp WTYPE=${_id})
endforeach()
# Device formats: the in-place conversion from file blocks at load (weight_format.h).
foreach(_name ${KVTRIE_DEVICE_FORMATS})
  set(_id ${KVTRIE_TYPE_ID_${_name}})
  kvtrie_shader(repack_${_name} repack.comp FORMAT=${_id})
endforeach()
# matvec_q8 (8-bit activations, integer dot products): <mode>_<type>, one shader per fold of the layer it
# carries (matvec_q8.h); token count and rows per lane are specialization constants.
foreach(_name ${KVTRIE_TILED_TYPES})
  set(_id ${KVTRIE_TYPE_ID_${_name}})
  foreach(_build matvec_q8 matvec_q8i)
    set(_dot "")
    if(_build STREQUAL "matvec_q8i")
      # GL_EXT_integer_dot_product, where the compiler has it.
      if(NOT KVTRIE_GLSL_INT_DOT)
        continue()
      endif()
      set(_dot INT_DOT=1)
    endif()
    kvtrie_shader(${_build}_store_${_name} matvec_q8.comp WTYPE=${_id} ${_dot})
    kvtrie_shader(${_build}_norm_${_name} matvec_q8.comp WTYPE=${_id} ${_dot} NORM=1)
    kvtrie_shader(${_build}_acc_${_name} matvec_q8.comp WTYPE=${_id} ${_dot} ACCUMULATE=1)
    kvtrie_shader(${_build}_acc_qnorm_${_name} matvec_q8.comp WTYPE=${_id} ${_dot} ACCUMULATE=1 QUANT_OUT=1
                  NORM_OUT=1)
    kvtrie_shader(${_build}_norm_swiglu_${_name} matvec_q8.comp WTYPE=${_id} ${_dot} NORM=1 SWIGLU=1)
    kvtrie_shader(${_build}_norm_swiglu_qout_${_name} matvec_q8.comp WTYPE=${_id} ${_dot} NORM=1 SWIGLU=1
                  QUANT_OUT=1)
    kvtrie_shader(${_build}_norm_qkv_${_name} matvec_q8.comp WTYPE=${_id} ${_dot} NORM=1 QKV_PAGES=1)
  endforeach()
endforeach()
# x quantized once per batch for the PREQUANT builds above.
kvtrie_shader(quantize_q8_f32 quantize_q8.comp)
kvtrie_shader(quantize_q8_norm_f32 quantize_q8.comp NORM=1)
# Self-tests of the fast paths' toolchain (tests/kernels/test_fast_paths.cpp), built where glslc compiles
# their extension (cmake/glslc.cmake): the pattern for every shader that needs one.
if(KVTRIE_GLSL_INT_DOT)
  kvtrie_shader(selftest_int_dot selftest_int_dot.comp)
endif()
if(KVTRIE_GLSL_KHR_COOPMAT)
  kvtrie_shader(selftest_khr_coopmat selftest_khr_coopmat.comp)
endif()
if(KVTRIE_GLSL_NV_COOPMAT2)
  kvtrie_shader(selftest_nv_coopmat2 selftest_nv_coopmat2.comp TARGET_ENV vulkan1.3)
endif()
