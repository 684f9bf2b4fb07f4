// libFuzzer target: the tokenizers on arbitrary bytes. The first byte picks the vocabulary (SentencePiece, or
// byte-level BPE with the gpt-2, llama3 or qwen2 pre-tokenizer) and the encode options; the rest is the text.
// Checks what tokenizer.h promises: every id is in the vocabulary; decode(encode(x)) == x for BPE, and for
// SentencePiece when x holds no U+2581 (without parse_special, whose control tokens decode to nothing);
// the streaming decoder emits only valid UTF-8. A failed check aborts, which libFuzzer reports as a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_support.h"

namespace {

struct Tokenizers {
  std::unique_ptr<kvtrie::Tokenizer> spm = kvtrie::fuzz::load_tokenizer(kvtrie::fuzz::spm_vocab());
  std::unique_ptr<kvtrie::Tokenizer> gpt2 = kvtrie::fuzz::load_tokenizer(kvtrie::fuzz::bpe_vocab("gpt-2"));
  std::unique_ptr<kvtrie::Tokenizer> llama3 =
      kvtrie::fuzz::load_tokenizer(kvtrie::fuzz::bpe_vocab("llama-bpe"));
  std::unique_ptr<kvtrie::Tokenizer> qwen2 = kvtrie::fuzz::load_tokenizer(kvtrie::fuzz::bpe_vocab("qwen2"));
};

void check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kvtrie::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers all;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const kvtrie::Tokenizer* tokenizers[] = {all.spm.get(), all.gpt2.get(), all.llama3.get(), all.qwen2.get()};
  const kvtrie::Tokenizer& tok = *tokenizers[mode & 3];
  kvtrie::EncodeOptions options;
  options.add_bos = (mode & 4) != 0;
  options.add_eos = (mode & 8) != 0;
  options.parse_special = (mode & 16) != 0;

  const std::vector<int32_t> ids = tok.encode(text, options);
  for (const int32_t id : ids)
    check(id >= 0 && id < tok.n_vocab(), "encode produced an id outside the vocab");

  // The round trip: without the added BOS/EOS (decode keeps them as text with render_special) and without
  // parse_special (a special token's text would come back only with render_special, and then the BOS/EOS
  // texts too).
  const bool spm = tok.model() == kvtrie::VocabModel::spm;
  if (!options.parse_special && (!spm || text.find("\xe2\x96\x81") == std::string_view::npos)) {
    const std::vector<int32_t> plain = tok.encode(text, kvtrie::EncodeOptions{});
    check(tok.decode(plain) == text, "decode(encode(x)) != x");
  }

  kvtrie::StreamingDecoder stream(tok, /*at_text_start=*/true);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  check(kvtrie::utf8::is_valid(streamed), "the streaming decoder emitted invalid UTF-8");
  for (const int32_t id : ids) {
    volatile size_t n = tok.token_piece(id).size() + tok.token_text(id).size();
    (void)n;
  }
  return 0;
}
