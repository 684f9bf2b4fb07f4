// Contract: helpers shared by the libFuzzer targets of fuzz/: an in-memory file (memfd) that the path-based
// GGUF reader can open, and the small tokenizer vocabularies the targets build for themselves (SentencePiece
// and byte-level BPE with each pre-tokenizer), written with the project's GgufWriter. Single-threaded fuzz
// code: one MemFile per process, rewritten for each input.
#pragma once
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runner/model/gguf_file.h"
#include "runner/model/gguf_writer.h"
#include "runner/tokenizer/bpe_model.h"
#include "runner/tokenizer/tokenizer.h"
#include "runner/tokenizer/utf8.h"

namespace kvtrie::fuzz {

// A file that lives in memory: GgufFile::open takes a path, and /proc/self/fd/N of a memfd is one without
// touching the disk for every input.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("kvtrie-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) std::abort();
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the contents; returns the path to open.
  std::string write(const uint8_t* data, size_t size) {
    if (ftruncate(fd_, 0) != 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

// The tokenizer logs a warning for an unknown pre-tokenizer name; a fuzz run would print it per input.
inline void quiet_logs() {
  spdlog::set_level(spdlog::level::off);
}

inline std::string alphabet(std::string_view bytes) {
  std::string out;
  for (char c : bytes) utf8::append(out, byte_to_alphabet(static_cast<uint8_t>(c)));
  return out;
}

// Control tokens of the common chat formats, so that parse_special has something to cut out.
inline const std::vector<std::string>& special_texts() {
  static const std::vector<std::string> texts = {"<|im_start|>", "<|im_end|>", "<|eot_id|>",
                                                 "<|start_header_id|>", "<think>"};
  return texts;
}

// Byte-level BPE: the 256 byte tokens, words reachable by merging left to right, then the control tokens.
inline GgufWriter bpe_vocab(const std::string& pre) {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(alphabet(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  std::vector<std::string> merges;
  for (const std::string word :
       std::vector<std::string>{" the", "the", " a", "er", " hello", "ing", "123", "\xc3\xa9t\xc3\xa9"}) {
    std::string prefix = alphabet(word.substr(0, 1));
    for (size_t i = 1; i < word.size(); ++i) {
      const std::string next = alphabet(word.substr(i, 1));
      const std::string merged = prefix + next;
      merges.push_back(prefix + " " + next);
      if (std::find(tokens.begin(), tokens.end(), merged) == tokens.end()) {
        tokens.push_back(merged);
        types.push_back(1);
      }
      prefix = merged;
    }
  }
  for (const std::string& s : special_texts()) {
    tokens.push_back(s);
    types.push_back(3);
  }
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tokens.size() - special_texts().size()));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tokens.size() - special_texts().size() + 1));
  return w;
}

// SentencePiece: <unk>, <s>, </s>, the 256 byte tokens, a few scored pieces (with U+2581 for spaces) and the
// control tokens; BOS added by default, as Llama 2 vocabularies do.
inline GgufWriter spm_vocab() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<double> scores = {0, 0, 0};
  std::vector<int64_t> types = {2, 3, 3};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b / 16] + kHex[b % 16] + ">");
    scores.push_back(0);
    types.push_back(6);
  }
  const std::string space = "\xe2\x96\x81";
  double score = -1;
  for (const std::string& piece :
       std::vector<std::string>{space, space + "t", space + "th", space + "the", "e", "h", "t", "he", "a",
                                space + "a", "\xc3\xa9", "\xe4\xb8\xad", "in", "ing"}) {
    tokens.push_back(piece);
    scores.push_back(score);
    score -= 0.5;
    types.push_back(1);
  }
  for (const std::string& s : special_texts()) {
    tokens.push_back(s);
    scores.push_back(0);
    types.push_back(3);
  }
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  return w;
}

// Loads a vocabulary through the same path a model takes: the GGUF bytes, GgufFile::open,
// Tokenizer::from_gguf.
inline std::unique_ptr<Tokenizer> load_tokenizer(const GgufWriter& writer) {
  MemFile file;
  const std::vector<uint8_t> bytes = writer.to_bytes();
  const GgufFile gguf = GgufFile::open(file.write(bytes.data(), bytes.size()));
  return Tokenizer::from_gguf(gguf);
}

}  // namespace kvtrie::fuzz
