# One line per shader variant: kvtrie_shader(<op>_<variant> <source>.comp [DEFINE=VALUE...]).
kvtrie_shader(fill_f32 fill.comp)
kvtrie_shader(rms_norm_f32 rms_norm.comp)
kvtrie_shader(rms_norm_add_f32 rms_norm.comp ADD_RESIDUAL=1)
kvtrie_shader(rope_f32 rope.comp)
kvtrie_shader(swiglu_f32 swiglu.comp)
kvtrie_shader(convert_f32_f16 convert.comp)
kvtrie_shader(add_f32 add.comp)
kvtrie_shader(add_bias_f32 add_bias.comp)
kvtrie_shader(read_probe_u32 read_probe.comp)
kvtrie_shader(kv_write_f16 kv_write.comp)
kvtrie_shader(kv_write_rope_f16 kv_write.comp ROPE=1)
kvtrie_shader(kv_write_rope_qkv_f16 kv_write.comp ROPE=1 QKV=1)
# get_rows, matvec, matmul: one variant per weight type; WTYPE is the GGML type id, or a device format's id
# (kernels/tensor_type.h, matvec_blocks.glsl).
foreach(_t f32:0 f16:1 bf16:30 q8_0:8 q4_0:2 q4_1:3 q5_0:6 q5_1:7 q4_k:12 q5_k:13 q6_k:14 q4_0x8:102 q8_0x8:108
           q6_kx8:114)
  string(REPLACE ":" ";" _p ${_t})
  list(GET _p 0 _name)
  list(GET _p 1 _id)
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
# The tensor-core matmul through VK_NV_cooperative_matrix2 (SPIR-V 1.6), for the 16-byte aligned formats.
if(KVTRIE_GLSL_NV_COOPMAT2)
  foreach(_t q4_0x8:102 q8_0x8:108 q6_kx8:114 q4_k:12 q5_k:13)
    string(REPLACE ":" ";" _p ${_t})
    list(GET _p 0 _name)
    list(GET _p 1 _id)
    kvtrie_shader(matmul_cm2_${_name} matmul_cm2.comp TARGET_ENV vulkan1.3 WTYPE=${_id})
  endforeach()
endif()
# paged attention: split pass + combine pass. Each split pass also in a build for a pool in one binding
# (ONE_BINDING, the engine's default: no branch around each K/V load; kv_pool.glsl).
kvtrie_shader(attention_paged attention.comp)
kvtrie_shader(attention_paged_one attention.comp ONE_BINDING=1)
kvtrie_shader(attention_combine attention_combine.comp)
kvtrie_shader(attention_combine_qout attention_combine.comp QUANT_OUT=1)
# ... its split pass for decode batches (attention_decode.comp), per subgroup size and head_dim.
foreach(_lanes 8 16 32 64)
  foreach(_hd 64 128)
    kvtrie_shader(attention_decode_l${_lanes}_d${_hd} attention_decode.comp HD=${_hd}u LANES=${_lanes}u)
    kvtrie_shader(attention_decode_l${_lanes}_d${_hd}_one attention_decode.comp HD=${_hd}u LANES=${_lanes}u
                  ONE_BINDING=1)
  endforeach()
endforeach()
# ... its split pass on tensor cores for prefill blocks (attention_coopmat.comp), per head_dim, with the
# subgroups a work group that measured fastest for it (attention.cpp, coopmat_rows).
if(KVTRIE_GLSL_KHR_COOPMAT)
  kvtrie_shader(attention_coopmat_d64 attention_coopmat.comp HD=64u SG=4u)
  kvtrie_shader(attention_coopmat_d128 attention_coopmat.comp HD=128u SG=8u)
  kvtrie_shader(attention_coopmat_d64_one attention_coopmat.comp HD=64u SG=4u ONE_BINDING=1)
  kvtrie_shader(attention_coopmat_d128_one attention_coopmat.comp HD=128u SG=8u ONE_BINDING=1)
endif()
# Tuning probes of attention_decode (bench sweep-attention --probes only): V loaded in the PV loop instead of
# ahead of the scores, 4 heads a work group instead of 8.
kvtrie_shader(attention_decode_l32_d128_one_novpre attention_decode.comp HD=128u LANES=32u ONE_BINDING=1
              NO_V_PREFETCH=1)
kvtrie_shader(attention_decode_l32_d128_one_g4 attention_decode.comp HD=128u LANES=32u ONE_BINDING=1 MAX_G=4u)
kvtrie_shader(attention_decode_l32_d64_one_novpre attention_decode.comp HD=64u LANES=32u ONE_BINDING=1
              NO_V_PREFETCH=1)
kvtrie_shader(attention_decode_l32_d64_one_g4 attention_decode.comp HD=64u LANES=32u ONE_BINDING=1 MAX_G=4u)
# Tuning probes of the tensor-core matmul (bench sweep-matmul only): without the loads, without the multiplies.
if(KVTRIE_GLSL_KHR_COOPMAT)
  kvtrie_shader(matmul_coopmat_khr_noload_q4_0x8 matmul_coopmat.comp WTYPE=102 KHR_COOPMAT=1 PROBE_NO_LOADS=1)
  kvtrie_shader(matmul_coopmat_khr_nomul_q4_0x8 matmul_coopmat.comp WTYPE=102 KHR_COOPMAT=1 PROBE_NO_MULTIPLY=1)
endif()
# The tensor-core matmul's 16-value loader on its own (tests only: checkable without cooperative matrices).
foreach(_t q4_0x8:102 q8_0x8:108 q6_kx8:114 q4_k:12 q5_k:13)
  string(REPLACE ":" ";" _p ${_t})
  list(GET _p 0 _name)
  list(GET _p 1 _id)
  kvtrie_shader(tile_decode_${_name} tile_decode.comp WTYPE=${_id})
endforeach()
# Device formats: the in-place conversion from file blocks at load (weight_format.h).
foreach(_t q4_0x8:102 q8_0x8:108 q6_kx8:114)
  string(REPLACE ":" ";" _p ${_t})
  list(GET _p 0 _name)
  list(GET _p 1 _id)
  kvtrie_shader(repack_${_name} repack.comp FORMAT=${_id})
endforeach()
# matvec_q8 (8-bit activations, integer dot products): <mode>_<type>, one shader per fold of the layer it
# carries (matvec_q8.h); token count and rows per lane are specialization constants.
foreach(_t q4_0x8:102 q8_0x8:108 q6_kx8:114 q4_k:12 q5_k:13)
  string(REPLACE ":" ";" _p ${_t})
  list(GET _p 0 _name)
  list(GET _p 1 _id)
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
