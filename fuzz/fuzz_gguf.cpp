// libFuzzer target: whole GGUF files through GgufFile::open, then everything the model loader reads from an
// opened file (every metadata entry through every typed getter, every tensor's info and data bytes, the model
// config and weights, the tokenizer). A corrupt file must end in kvtrie::InputError; any other exception,
// a crash or a sanitizer report is a finding. Seeds: small valid files written by fuzz/make_seeds.cpp.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "fuzz/fuzz_support.h"
#include "runner/model/model_config.h"

namespace {

// Reads every byte the accessors hand out, so that a span past the mapping faults here.
uint64_t touch(std::span<const uint8_t> bytes) {
  uint64_t sum = 0;
  for (const uint8_t b : bytes) sum += b;
  return sum;
}

void walk(const kvtrie::GgufFile& file) {
  volatile uint64_t sink = file.version() + file.alignment();
  for (const auto& [key, entry] : file.metadata()) {
    sink = sink + file.get_uint(key).value_or(0) + static_cast<uint64_t>(file.get_int(key).value_or(0));
    sink =
        sink + static_cast<uint64_t>(file.get_float(key).value_or(0) != 0) + file.get_bool(key).value_or(0);
    sink = sink + file.get_string(key).value_or("").size();
    if (const auto* strings = file.get_string_array(key)) sink = sink + strings->size();
    if (const auto floats = file.get_float_array(key)) sink = sink + floats->size();
    if (const auto ints = file.get_int_array(key)) sink = sink + ints->size();
    if (const auto* array = std::get_if<kvtrie::GgufArray>(&entry.value)) sink = sink + array->size();
    if (file.find(key) != &entry) std::abort();  // the index and the map disagree
  }
  for (const kvtrie::GgufTensor& t : file.tensors()) {
    sink = sink + t.element_count() + t.rows() + touch(t.data);
    if (file.find_tensor(t.name) != &t) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kvtrie::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvtrie::fuzz::MemFile mem;
  const std::string path = mem.write(data, size);
  try {
    const kvtrie::GgufFile file = kvtrie::GgufFile::open(path);
    walk(file);
    try {
      const kvtrie::ModelConfig config = kvtrie::ModelConfig::from_gguf(file);
      const kvtrie::ModelWeights weights = kvtrie::ModelWeights::from_gguf(file, config);
      volatile size_t layers = weights.layers.size();
      (void)layers;
    } catch (const kvtrie::InputError&) {
    }
    try {
      const auto tokenizer = kvtrie::Tokenizer::from_gguf(file);
      const std::vector<int32_t> ids = tokenizer->encode("Hello world, <s> 123", true, true);
      volatile size_t n = tokenizer->decode(ids, true).size();
      (void)n;
    } catch (const kvtrie::InputError&) {
    }
  } catch (const kvtrie::InputError&) {
  }
  return 0;
}
