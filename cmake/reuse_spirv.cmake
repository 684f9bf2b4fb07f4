# Copies one embedded SPIR-V source (FROM, made by another build folder's glslc, see KVTRIE_SPIRV_FROM in
# kernels/CMakeLists.txt) to OUT, after checking that no shader source (SOURCES, a list) is newer than it:
# a shader edited after that build compiled it must not be embedded stale.
foreach(src ${SOURCES})
  if("${src}" IS_NEWER_THAN "${FROM}")
    message(FATAL_ERROR "${FROM} is older than ${src}: build the shaders of KVTRIE_SPIRV_FROM first")
  endif()
endforeach()
file(COPY_FILE "${FROM}" "${OUT}" ONLY_IF_DIFFERENT)
