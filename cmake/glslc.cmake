# The GLSL compiler and what it can compile (SPEC.md section 3, docs/kernels.md "Shader toolchain").
#
# GLSLC is, in order: a -DGLSLC=... given by the user; Debian trixie's glslc that scripts/install-glslc unpacks
# into .deps/glslc-trixie/ (it compiles every fast path); the system glslc (bookworm's compiles only the
# portable shaders and GL_NV_cooperative_matrix). Each fast path's extension is then probed by compiling a tiny
# shader from cmake/glsl_probes/, and the answers are ON/OFF variables for kernels/shaders/variants.cmake
# and kernels/shader_features.h:
#   KVTRIE_GLSL_NV_COOPMAT   GL_NV_cooperative_matrix
#   KVTRIE_GLSL_KHR_COOPMAT  GL_KHR_cooperative_matrix
#   KVTRIE_GLSL_NV_COOPMAT2  GL_NV_cooperative_matrix2 (SPIR-V 1.6: compile those shaders with TARGET_ENV vulkan1.3)
#   KVTRIE_GLSL_INT_DOT      GL_EXT_integer_dot_product
# KVTRIE_GLSLC_VERSION holds the compiler's "shaderc ..., glslang ..." version text.

set(GLSLC "" CACHE FILEPATH "GLSL to SPIR-V compiler (empty: .deps/glslc-trixie/glslc when present, else glslc)")
set(_kvtrie_local_glslc ${PROJECT_SOURCE_DIR}/.deps/glslc-trixie/glslc)
set(_kvtrie_probe_dir ${PROJECT_BINARY_DIR}/glsl_probes)
file(MAKE_DIRECTORY ${_kvtrie_probe_dir})

# _kvtrie_glsl_probe(COMPILER PROBE ENV OUT): OUT is ON when COMPILER compiles cmake/glsl_probes/PROBE.comp
# for target environment ENV. A failure that is not "not supported" is reported: a broken probe or compiler
# must not pass for an old compiler.
function(_kvtrie_glsl_probe compiler probe env out)
  execute_process(
    COMMAND ${compiler} --target-env=${env} -O -o ${_kvtrie_probe_dir}/${probe}.spv
            ${PROJECT_SOURCE_DIR}/cmake/glsl_probes/${probe}.comp
    RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(rc EQUAL 0)
    set(${out} ON PARENT_SCOPE)
    return()
  endif()
  if(NOT "${stderr}" MATCHES "not supported")
    message(WARNING "glslc probe ${probe} failed for a reason other than a missing extension:\n${stdout}${stderr}")
  endif()
  set(${out} OFF PARENT_SCOPE)
endfunction()

# A GLSLC equal to the last automatic choice was not given by the user: choose again (the local compiler may
# have been installed or removed since).
if(GLSLC AND NOT GLSLC STREQUAL "${_KVTRIE_GLSLC_AUTO}")
  _kvtrie_glsl_probe(${GLSLC} baseline vulkan1.2 _works)
  if(NOT _works)
    message(FATAL_ERROR "GLSLC=${GLSLC} does not compile a plain compute shader")
  endif()
  if(EXISTS ${_kvtrie_local_glslc} AND NOT GLSLC STREQUAL "${_kvtrie_local_glslc}")
    message(STATUS "GLSLC is set, so ${_kvtrie_local_glslc} is not used (-DGLSLC= to choose automatically)")
  endif()
else()
  find_program(KVTRIE_SYSTEM_GLSLC glslc)
  set(_choice "")
  if(EXISTS ${_kvtrie_local_glslc})
    _kvtrie_glsl_probe(${_kvtrie_local_glslc} baseline vulkan1.2 _works)
    if(_works)
      set(_choice ${_kvtrie_local_glslc})
    else()
      message(WARNING "${_kvtrie_local_glslc} does not run (rerun scripts/install-glslc); using the system glslc")
    endif()
  endif()
  if(NOT _choice)
    if(NOT KVTRIE_SYSTEM_GLSLC)
      message(FATAL_ERROR "no glslc found: install Debian's glslc (scripts/install-deps) or pass -DGLSLC=path")
    endif()
    set(_choice ${KVTRIE_SYSTEM_GLSLC})
  endif()
  set(GLSLC ${_choice} CACHE FILEPATH "GLSL to SPIR-V compiler" FORCE)
  set(_KVTRIE_GLSLC_AUTO ${_choice} CACHE INTERNAL "the GLSLC chosen automatically at the last configure")
endif()

_kvtrie_glsl_probe(${GLSLC} nv_coopmat vulkan1.2 KVTRIE_GLSL_NV_COOPMAT)
_kvtrie_glsl_probe(${GLSLC} khr_coopmat vulkan1.2 KVTRIE_GLSL_KHR_COOPMAT)
_kvtrie_glsl_probe(${GLSLC} nv_coopmat2 vulkan1.3 KVTRIE_GLSL_NV_COOPMAT2)
_kvtrie_glsl_probe(${GLSLC} int_dot vulkan1.2 KVTRIE_GLSL_INT_DOT)

execute_process(COMMAND ${GLSLC} --version OUTPUT_VARIABLE _version ERROR_QUIET)
string(REGEX MATCH "shaderc [^\n]*" _shaderc "${_version}")
string(REGEX MATCH "glslang [^\n]*" _glslang "${_version}")
set(KVTRIE_GLSLC_VERSION "${_shaderc}, ${_glslang}")
message(STATUS "kvtrie shaders: ${GLSLC} (${KVTRIE_GLSLC_VERSION}): NV_coopmat ${KVTRIE_GLSL_NV_COOPMAT}, "
               "KHR_coopmat ${KVTRIE_GLSL_KHR_COOPMAT}, NV_coopmat2 ${KVTRIE_GLSL_NV_COOPMAT2}, "
               "int_dot ${KVTRIE_GLSL_INT_DOT}")
