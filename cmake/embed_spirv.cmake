# Turns one .spv file into a .cpp defining kvtrie::vk::SpirvBlob spirv_<VARIANT> (words, little-endian). The
# array's name is the variant's too, so that several of these files can be included in one translation unit
# (a build with KVTRIE_SPIRV_FROM compiles them so, kernels/CMakeLists.txt).
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR words "${n} / 8")
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])" "0x\\4\\3\\2\\1u," body "${hex}")
file(WRITE ${OUT} "#include \"kernels/vk/shader_registry.h\"\nstatic const uint32_t spirv_words_${VARIANT}[] = {${body}};\n"
  "extern const kvtrie::vk::SpirvBlob spirv_${VARIANT};\n"
  "const kvtrie::vk::SpirvBlob spirv_${VARIANT}{\"${VARIANT}\", spirv_words_${VARIANT}, ${words}};\n")
