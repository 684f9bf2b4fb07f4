// Helpers shared by the tokenizer tests: the reference vocab files of ../shared/vocab with their test
// vectors, an independent UTF-8 validity check (ICU), and small synthetic vocab files written with GgufWriter
// so that tests without ../shared still cover the logic. Single-threaded test code.
#pragma once
#include <unicode/ustring.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runner/model/gguf_file.h"
#include "runner/model/gguf_writer.h"
#include "runner/tokenizer/bpe_model.h"
#include "runner/tokenizer/tokenizer.h"
#include "runner/tokenizer/utf8.h"
#include "tests/support/paths.h"

namespace kvtrie::test {

inline std::string vocab_path(const std::string& name) {
  return "vocab/ggml-vocab-" + name + ".gguf";
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TestVector {
  std::string input;
  std::vector<int32_t> expected;
};

// NAME.gguf.inp holds inputs each followed by "\n__ggml_vocab_test__\n"; NAME.gguf.out one line of ids per
// input.
inline std::vector<TestVector> read_vectors(const std::string& name) {
  const std::string inputs = read_file(shared_dir() / (vocab_path(name) + ".inp"));
  const std::string outputs = read_file(shared_dir() / (vocab_path(name) + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<TestVector> vectors;
  for (size_t pos = 0;;) {
    const size_t end = inputs.find(separator, pos);
    if (end == std::string::npos) break;
    vectors.push_back({inputs.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(outputs);
  std::string line;
  for (TestVector& vector : vectors) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) vector.expected.push_back(id);
  }
  return vectors;
}

struct LoadedTokenizer {
  GgufFile file;
  std::unique_ptr<Tokenizer> tokenizer;
};

inline LoadedTokenizer load_tokenizer(const std::filesystem::path& path) {
  GgufFile file = GgufFile::open(path);
  auto tokenizer = Tokenizer::from_gguf(file);
  return {std::move(file), std::move(tokenizer)};
}

// Well-formed UTF-8 according to ICU (an oracle independent of runner/tokenizer/utf8.cpp).
inline bool icu_valid_utf8(const std::string& text) {
  UErrorCode status = U_ZERO_ERROR;
  int32_t length = 0;
  u_strFromUTF8(nullptr, 0, &length, text.data(), static_cast<int32_t>(text.size()), &status);
  return status == U_BUFFER_OVERFLOW_ERROR || status == U_STRING_NOT_TERMINATED_WARNING || U_SUCCESS(status);
}

inline std::string alphabet_text(std::string_view bytes) {
  std::string out;
  for (char c : bytes) utf8::append(out, byte_to_alphabet(static_cast<uint8_t>(c)));
  return out;
}

// A byte-level BPE vocab: the 256 byte tokens (ids 0..255 in byte order), then `words` (plain text, each
// reachable by merging left to right in the order given), then `specials` (control tokens).
inline GgufWriter byte_bpe_writer(const std::vector<std::string>& words,
                                  const std::vector<std::string>& specials,
                                  const std::string& pre = "gpt-2") {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(alphabet_text(std::string(1, static_cast<char>(b))));
    types.push_back(1);
  }
  std::vector<std::string> merges;
  for (const std::string& word : words) {
    std::string prefix = alphabet_text(word.substr(0, 1));
    for (size_t i = 1; i < word.size(); ++i) {
      const std::string next = alphabet_text(word.substr(i, 1));
      merges.push_back(prefix + " " + next);
      prefix += next;
      if (std::find(tokens.begin(), tokens.end(), prefix) == tokens.end()) {
        tokens.push_back(prefix);
        types.push_back(1);
      }
    }
  }
  for (const std::string& special : specials) {
    tokens.push_back(special);
    types.push_back(3);
  }
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", pre);
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", types);
  writer.set_string_array("tokenizer.ggml.merges", merges);
  return writer;
}

// A SentencePiece vocab: <unk>, <s>, </s>, the 256 <0xXX> byte tokens, then `pieces` (text, score) as normal
// tokens. Ids of pieces start at 259.
inline GgufWriter spm_writer(const std::vector<std::pair<std::string, double>>& pieces) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<double> scores = {0, 0, 0};
  std::vector<int64_t> types = {2, 3, 3};
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + hex[b / 16] + hex[b % 16] + ">");
    scores.push_back(0);
    types.push_back(6);
  }
  for (const auto& [text, score] : pieces) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(1);
  }
  GgufWriter writer;
  writer.set_string("general.architecture", "llama");
  writer.set_string("tokenizer.ggml.model", "llama");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_f32_array("tokenizer.ggml.scores", scores);
  writer.set_i32_array("tokenizer.ggml.token_type", types);
  writer.set_u32("tokenizer.ggml.bos_token_id", 1);
  writer.set_u32("tokenizer.ggml.eos_token_id", 2);
  writer.set_u32("tokenizer.ggml.unknown_token_id", 0);
  return writer;
}

inline LoadedTokenizer write_and_load(const GgufWriter& writer, const std::string& name) {
  const std::filesystem::path path = scratch_dir() / name;
  writer.write(path);
  return load_tokenizer(path);
}

}  // namespace kvtrie::test
