// The seed corpora of the libFuzzer targets, generated at fuzz time rather than committed as binaries:
//   OUT/gguf/           small valid models written by the synthetic-model writer (presets tiny, tiny-qwen2,
//                       tiny-qwen3 at several tensor types), the targets' own vocabularies, and a file with
//                       every metadata value type, arrays and a non-default alignment
//   OUT/request_json/   request bodies of every API
//   OUT/tokenizer/      a mode byte (vocabulary and encode options, see fuzz_tokenizer.cpp) and a text
//   OUT/chat_template/  a few byte strings (FuzzedDataProvider reads any bytes)
//   OUT/disk_page/      page files written by write_page_file, of several shapes, in each mode of the target
//                       (fuzz/disk_page_input.h), a truncated and a foreign one, and page file names
// Usage: kvtrie-fuzz-seeds OUT
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "bench/synthetic/synthetic_model.h"
#include "cache/disk_page_file.h"
#include "fuzz/disk_page_input.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Every value type, arrays of each kind, a 64-byte alignment and tensors of several types and ranks.
kvtrie::GgufWriter every_value_type() {
  kvtrie::GgufWriter w;
  w.set_alignment(64);
  w.set_u8("a.u8", 200);
  w.set_i8("a.i8", -100);
  w.set_u16("a.u16", 60000);
  w.set_i16("a.i16", -30000);
  w.set_u32("a.u32", 4000000000u);
  w.set_i32("a.i32", -2000000000);
  w.set_u64("a.u64", UINT64_MAX);
  w.set_i64("a.i64", INT64_MIN);
  w.set_f32("a.f32", 1.5f);
  w.set_f64("a.f64", -2.25);
  w.set_bool("a.bool", true);
  w.set_string("a.string", "text \xe2\x96\x81");
  w.set_string_array("a.strings", {"x", "", "yz"});
  w.set_f32_array("a.floats", {0.5, -1});
  w.set_i32_array("a.ints", {1, -2, 3});
  const std::vector<uint8_t> f32(4 * 8, 0x3f), q8(34 * 2, 1);
  w.add_tensor("t.f32", kvtrie::TensorType::F32, {4, 2}, f32);
  w.add_tensor("t.q8_0", kvtrie::TensorType::Q8_0, {32, 1, 2, 1}, q8);
  w.add_tensor("t.f16", kvtrie::TensorType::F16, {3}, std::vector<uint8_t>(6, 2));
  return w;
}

// The page file write_page_file writes (in scratch, then removed) for a page of `tokens` and KV bytes made
// from its size.
std::string page_file(const fs::path& scratch, std::uint64_t fingerprint, kvtrie::PageHash hash,
                      const std::vector<kvtrie::TokenId>& tokens, std::size_t page_bytes) {
  std::vector<std::byte> kv(page_bytes);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<std::byte>(i * 31 + page_bytes);
  fs::create_directories(scratch);
  if (!kvtrie::write_page_file(scratch, {fingerprint, hash, tokens, page_bytes}, kv).ok()) std::abort();
  const fs::path path = scratch / kvtrie::page_file_name(fingerprint, hash);
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  fs::remove(path);
  return bytes;
}

void write_disk_page_seeds(const fs::path& dir) {
  namespace kf = kvtrie::fuzz;
  const fs::path scratch = dir / "scratch";
  // Valid pages of the fixed identity: empty, tiny, typical and the largest shape, read directly.
  for (const auto& [n, bytes] : std::vector<std::pair<std::uint32_t, std::size_t>>{
           {0, 0}, {1, 1}, {4, 100}, {15, kf::kDiskMaxPageBytes}}) {
    const std::string file =
        page_file(scratch, kf::kDiskFingerprint, kf::kDiskHash, kf::disk_fixed_tokens(n), bytes);
    write_text(dir / ("page-" + std::to_string(n) + "-" + std::to_string(bytes)),
               kf::disk_input_prefix(0, n, bytes) + file);
  }
  const std::vector<kvtrie::TokenId> tokens = kf::disk_fixed_tokens(4);
  const std::string page = page_file(scratch, kf::kDiskFingerprint, kf::kDiskHash, tokens, 100);
  write_text(dir / "page-store", kf::disk_input_prefix(kf::kDiskThroughStore, 4, 100) + page);
  write_text(dir / "page-fix-checksums", kf::disk_input_prefix(kf::kDiskFixChecksums, 4, 100) + page);
  write_text(dir / "page-truncated", kf::disk_input_prefix(0, 4, 100) + page.substr(0, page.size() - 10));
  write_text(dir / "page-store-truncated",
             kf::disk_input_prefix(kf::kDiskThroughStore, 4, 100) + page.substr(0, page.size() - 10));
  // Another model's page of the same shape, under this one's identity: Foreign.
  write_text(dir / "page-foreign",
             kf::disk_input_prefix(0, 4, 100) +
                 page_file(scratch, kf::kDiskFingerprint + 1, kf::kDiskHash, tokens, 100));
  // A page of its own identity (other fingerprint, hash and tokens), read as that identity.
  write_text(dir / "page-own-identity",
             kf::disk_input_prefix(kf::kDiskIdentityFromFile, 3, 64) +
                 page_file(scratch, 0xfeedface, 0xdeadbeef, {-1, 0, 2147483647}, 64));
  fs::remove_all(scratch);

  const std::string name = kvtrie::page_file_name(kf::kDiskFingerprint, kf::kDiskHash);
  std::string upper = name;
  upper[3] = 'A';
  for (const auto& [file, text] : std::vector<std::pair<std::string, std::string>>{
           {"name", name},
           {"name-temporary", name + kvtrie::kPageFileTempSuffix},
           {"name-upper", upper},
           {"name-zero", kvtrie::page_file_name(0, 0)},
           {"name-short", name.substr(1)}})
    write_text(dir / file, text);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT\n", argv[0]);
    return 2;
  }
  kvtrie::fuzz::quiet_logs();
  const fs::path out = argv[1];
  for (const char* dir : {"gguf", "request_json", "tokenizer", "chat_template", "disk_page"})
    fs::create_directories(out / dir);

  using kvtrie::TensorType;
  for (const char* preset : {"tiny", "tiny-qwen2", "tiny-qwen3"})
    for (const TensorType type : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                                  TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
      const std::string name = std::string(preset) + "-" + std::to_string(static_cast<int>(type)) + ".gguf";
      kvtrie::synth::write_preset(out / "gguf" / name, preset, type);
    }
  write_bytes(out / "gguf" / "vocab-spm.gguf", kvtrie::fuzz::spm_vocab().to_bytes());
  write_bytes(out / "gguf" / "vocab-bpe.gguf", kvtrie::fuzz::bpe_vocab("qwen2").to_bytes());
  write_bytes(out / "gguf" / "every-value-type.gguf", every_value_type().to_bytes());

  const std::vector<std::string> bodies = {
      R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0, "stream": false})",
      R"({"tokens": [1, 300, 5], "add_bos": true, "stop": ["x", "y"], "logprobs": 3, "seed": -1})",
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
          "max_completion_tokens": 4, "stream": true, "stream_options": {"include_usage": true},
          "logprobs": true, "top_logprobs": 2, "chat_template_kwargs": {"enable_thinking": false}})",
      R"({"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}]},
          {"role": "user", "content": "b"}], "n": 1, "response_format": {"type": "text"}})",
      R"({"prompt": ["Hello"], "echo": true, "max_tokens": 2, "cache_salt": "s", "top_p": 0.5})",
      R"({"prompt": [[5, 6, 7]], "logprobs": 1, "frequency_penalty": 1.5})",
      R"({"prompt": "Hi", "n_predict": -2, "n_probs": 2, "n_keep": 0, "cache_prompt": true, "top_k": 5})",
      R"({"Prompt": "Hi", "Options": {"num_predict": 3, "stop": "\n", "repeat_penalty": 1.1}})",
      // A "type" that is no string, where a string is compared (session 16's crash: json::value threw).
      R"({"messages": [{"role": "user", "content": [{"type": 0, "text": "a"}]}], "response_format": {"type": 1}})",
  };
  for (size_t i = 0; i < bodies.size(); ++i)
    write_text(out / "request_json" / ("body-" + std::to_string(i) + ".json"), bodies[i]);

  const std::vector<std::string> texts = {"Hello world",
                                          " the a\n\n  123456 caf\xc3\xa9",
                                          "<|im_start|>user\nhi<|im_end|>",
                                          "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                                          "it's don't I'LL",
                                          std::string("\xff\xfe\x00\x80 bad", 8)};
  for (size_t i = 0; i < texts.size(); ++i)
    for (const char mode : {'\x00', '\x01', '\x16', '\x13'})
      write_text(out / "tokenizer" / ("text-" + std::to_string(i) + "-" + std::to_string(mode) + ".txt"),
                 std::string(1, mode) + texts[i]);

  for (size_t i = 0; i < texts.size(); ++i)
    write_text(out / "chat_template" / ("bytes-" + std::to_string(i)),
               std::string(1, static_cast<char>(i)) + texts[i]);
  write_text(out / "chat_template" / "jinja", "\x01\x00\x01\x01{% for message in messages %}<|im_start|>");
  write_disk_page_seeds(out / "disk_page");
  return 0;
}
