# Turns one .spv file into a .cpp defining kvtrie::vk::SpirvBlob spirv_<VARIANT> (words, little-endian).
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR words "${n} / 8")
string(REGEX REPLACE "([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])([0-9a-f][0-9a-f])" "0x\\4\\3\\2\\1u," body "${hex}")
file(WRITE ${OUT} "#include \"kernels/vk/shader_registry.h\"\nstatic const uint32_t words[] = {${body}};\n"
  "extern const kvtrie::vk::SpirvBlob spirv_${VARIANT};\n"
  "const kvtrie::vk::SpirvBlob spirv_${VARIANT}{\"${VARIANT}\", words, ${words}};\n")
