#include "bench/probes/bench_shaders.h"

namespace kvtrie::bench {

const vk::SpirvBlob* find_bench_spirv(std::string_view name) {
  for (const vk::SpirvBlob* blob : bench_spirv_blobs())
    if (name == blob->name) return blob;
  return nullptr;
}

}  // namespace kvtrie::bench
