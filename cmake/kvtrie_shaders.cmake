# Shaders: every variant a folder lists is compiled by glslc at build time and embedded in its library as a
# SPIR-V blob (kernels/vk/shader_registry.h), found at run time by its variant name through the folder's
# table. kernels/ lists its own (kernels/shaders/variants.cmake); bench/ its probes (bench/CMakeLists.txt).
#
#   kvtrie_shaders_begin()                      this folder's variants go to ${CMAKE_CURRENT_BINARY_DIR}/spirv
#   kvtrie_shader(VARIANT SOURCE [TARGET_ENV ENV] [DEFINE...])
#   kvtrie_shader_table(TARGET NAMESPACE FUNCTION)   embeds them in TARGET with their table, FUNCTION()
#
# kvtrie_shader compiles one SPIR-V module from one .comp with preprocessor defines. SOURCE is a file of the
# folder's shaders/ or an absolute path (bench/ builds kernels/shaders/attention.comp with its probe
# defines); includes are found beside it, in kernels/shaders and in the generated tensor_types.glsl. ENV
# defaults to vulkan1.2 (SPIR-V 1.5, which lavapipe and every Vulkan 1.2 driver take); a shader that needs
# SPIR-V 1.6 (GL_NV_cooperative_matrix2) says vulkan1.3 and may then run only on Vulkan 1.3 devices.
# GL_KHR_cooperative_matrix and GL_EXT_integer_dot_product compile for vulkan1.2. What the compiler can
# compile at all is probed by cmake/glslc.cmake (KVTRIE_GLSL_* variables).
#
# KVTRIE_SPIRV_FROM: another build folder of this source tree whose shaders are built (empty, the default:
# compile them here). The SPIR-V depends on neither the build type nor the sanitizers, so scripts/test's
# later builds (Release, ASan, TSan) take the embedded SPIR-V sources of its first build instead of running
# glslc over every variant again (about 80 s of CPU each on 2 cores). Only the same glslc's output is taken
# (checked here against what that build recorded), and a shader source newer than a taken file fails the
# build (cmake/reuse_spirv.cmake): a stale SPIR-V is never embedded.
set(KVTRIE_SPIRV_FROM "" CACHE PATH "Build folder whose compiled shaders to reuse (empty: compile them here)")

macro(kvtrie_shaders_begin)
  set(KVTRIE_SPIRV_DIR ${CMAKE_CURRENT_BINARY_DIR}/spirv)
  file(MAKE_DIRECTORY ${KVTRIE_SPIRV_DIR})
  set(KVTRIE_SHADER_VARIANTS "")
  set(KVTRIE_SHADER_OUTPUTS "")
  set(_glslc_signature "${GLSLC} ${KVTRIE_GLSLC_VERSION}")
  file(WRITE ${KVTRIE_SPIRV_DIR}/glslc.txt "${_glslc_signature}")
  if(KVTRIE_SPIRV_FROM)
    file(RELATIVE_PATH _folder ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR})
    set(_from ${KVTRIE_SPIRV_FROM}/${_folder}/spirv)
    if(NOT EXISTS ${_from}/glslc.txt)
      message(FATAL_ERROR "KVTRIE_SPIRV_FROM=${KVTRIE_SPIRV_FROM}: no ${_from}/glslc.txt (not a kvtrie build folder)")
    endif()
    file(READ ${_from}/glslc.txt _from_signature)
    if(NOT _from_signature STREQUAL _glslc_signature)
      message(FATAL_ERROR "KVTRIE_SPIRV_FROM=${KVTRIE_SPIRV_FROM} compiled its shaders with ${_from_signature}, "
                          "this build would use ${_glslc_signature}")
    endif()
    message(STATUS "kvtrie shaders: taken from ${_from} (KVTRIE_SPIRV_FROM), not compiled here")
  endif()
endmacro()

macro(kvtrie_shader variant source)
  cmake_parse_arguments(_shader "" "TARGET_ENV" "" ${ARGN})
  if(NOT _shader_TARGET_ENV)
    set(_shader_TARGET_ENV vulkan1.2)
  endif()
  set(_defs "")
  foreach(d ${_shader_UNPARSED_ARGUMENTS})
    list(APPEND _defs -D${d})
  endforeach()
  if(IS_ABSOLUTE ${source})
    set(_source ${source})
  else()
    set(_source ${CMAKE_CURRENT_SOURCE_DIR}/shaders/${source})
  endif()
  get_filename_component(_source_dir ${_source} DIRECTORY)
  set(_include_flags -I${_source_dir})
  file(GLOB _includes ${_source_dir}/*.glsl)
  set(_kernels_shaders ${PROJECT_SOURCE_DIR}/kernels/shaders)
  if(NOT _source_dir STREQUAL _kernels_shaders)
    list(APPEND _include_flags -I${_kernels_shaders})
    file(GLOB _kernels_includes ${_kernels_shaders}/*.glsl)
    list(APPEND _includes ${_kernels_includes})
  endif()
  set(_spv ${KVTRIE_SPIRV_DIR}/${variant}.spv)
  set(_cpp ${KVTRIE_SPIRV_DIR}/${variant}.cpp)
  # The type ids' include is made from base/tensor_types.def: a taken variant is checked against the
  # manifest (this build's generated copy is newer than any taken file).
  set(_inputs ${_source} ${_includes} ${PROJECT_SOURCE_DIR}/base/tensor_types.def
              ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake)
  if(KVTRIE_SPIRV_FROM)
    # The same variant compiled by the other build (its command line is this one's: same variant lists).
    if(NOT EXISTS ${_from}/${variant}.cpp)
      message(FATAL_ERROR "KVTRIE_SPIRV_FROM: no ${_from}/${variant}.cpp (build that folder's shaders first)")
    endif()
    add_custom_command(
      OUTPUT ${_cpp}
      COMMAND ${CMAKE_COMMAND} -DFROM=${_from}/${variant}.cpp -DOUT=${_cpp} "-DSOURCES=${_inputs}"
              -P ${PROJECT_SOURCE_DIR}/cmake/reuse_spirv.cmake
      DEPENDS ${_from}/${variant}.cpp ${_inputs} ${PROJECT_SOURCE_DIR}/cmake/reuse_spirv.cmake
      COMMENT "spirv ${variant} (from ${KVTRIE_SPIRV_FROM})"
      VERBATIM)
  else()
    add_custom_command(
      OUTPUT ${_cpp}
      COMMAND ${GLSLC} --target-env=${_shader_TARGET_ENV} -O ${_include_flags}
              -I${KVTRIE_SHADER_GENERATED_DIR} ${_defs}
              -o ${_spv} ${_source}
      COMMAND ${CMAKE_COMMAND} -DSPV=${_spv} -DOUT=${_cpp} -DVARIANT=${variant}
              -P ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake
      DEPENDS ${_inputs} ${KVTRIE_SHADER_GENERATED_DIR}/tensor_types.glsl ${GLSLC}
      COMMENT "glslc ${variant}"
      VERBATIM)
  endif()
  list(APPEND KVTRIE_SHADER_VARIANTS ${variant})
  list(APPEND KVTRIE_SHADER_OUTPUTS ${_cpp})
endmacro()

macro(kvtrie_shader_table target namespace function)
  set(_decls "")
  set(_rows "")
  foreach(v ${KVTRIE_SHADER_VARIANTS})
    string(APPEND _decls "extern const kvtrie::vk::SpirvBlob spirv_${v};\n")
    string(APPEND _rows "    &spirv_${v},\n")
  endforeach()
  set(_table_namespace ${namespace})
  set(_table_function ${function})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/shader_table.cpp.in ${KVTRIE_SPIRV_DIR}/shader_table.cpp @ONLY)
  if(KVTRIE_SPIRV_FROM)
    # Taken, not compiled here: every variant's file in one translation unit (about 1 s of CPU in all, where a
    # translation unit each costs about 0.3 s apiece, 70 s for the 210 variants, mostly the same header
    # parsed again). The copies are made before it compiles (OBJECT_DEPENDS).
    set(_all_text "// Generated by cmake/kvtrie_shaders.cmake (KVTRIE_SPIRV_FROM): every embedded variant; do not edit.\n")
    foreach(_cpp ${KVTRIE_SHADER_OUTPUTS})
      string(APPEND _all_text "#include \"${_cpp}\"\n")
    endforeach()
    file(CONFIGURE OUTPUT ${KVTRIE_SPIRV_DIR}/spirv_all.cpp CONTENT "${_all_text}")
    set_source_files_properties(${KVTRIE_SPIRV_DIR}/spirv_all.cpp PROPERTIES OBJECT_DEPENDS "${KVTRIE_SHADER_OUTPUTS}")
    target_sources(${target} PRIVATE ${KVTRIE_SPIRV_DIR}/spirv_all.cpp ${KVTRIE_SPIRV_DIR}/shader_table.cpp)
  else()
    target_sources(${target} PRIVATE ${KVTRIE_SHADER_OUTPUTS} ${KVTRIE_SPIRV_DIR}/shader_table.cpp)
  endif()
endmacro()
