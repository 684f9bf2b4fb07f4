#include "server/generate_common.h"

#include <spdlog/spdlog.h>

#include <thread>

namespace kvtrie::server {

using engine::Chunk;
using engine::GenerationStream;

void read_sampling(const Json& obj, SamplingParams& p) {
  if (auto v = read_number(obj, "temperature", 0.0, 100.0)) p.temperature = static_cast<float>(*v);
  if (auto v = read_int(obj, "top_k", 0, 1 << 30)) p.top_k = static_cast<int32_t>(*v);
  if (auto v = read_number(obj, "top_p", 0.0, 1.0)) p.top_p = static_cast<float>(*v);
  if (auto v = read_number(obj, "min_p", 0.0, 1.0)) p.min_p = static_cast<float>(*v);
  if (auto v = read_number(obj, "typical_p", 0.0, 1.0)) p.typical_p = static_cast<float>(*v);
  if (auto v = read_number(obj, "repeat_penalty", 0.0, 100.0)) p.repeat_penalty = static_cast<float>(*v);
  if (auto v = read_int(obj, "repeat_last_n", -1, 1 << 20)) p.repeat_last_n = static_cast<int32_t>(*v);
  if (auto v = read_number(obj, "presence_penalty", -100.0, 100.0))
    p.presence_penalty = static_cast<float>(*v);
  if (auto v = read_number(obj, "frequency_penalty", -100.0, 100.0))
    p.frequency_penalty = static_cast<float>(*v);
  // Seeds come as any integer; -1 (and other negatives) mean "random" in llama.cpp and Ollama.
  if (auto v = read_int(obj, "seed", INT64_MIN, INT64_MAX)) {
    if (*v >= 0) p.seed = static_cast<uint64_t>(*v);
  }
  if (auto problem = validate(p)) throw_invalid(*problem);
}

std::vector<int32_t> tokenize_prompt(const LoadedModel& model, const Json& prompt, const char* key,
                                     std::optional<bool> add_bos, bool parse_special) {
  const Tokenizer& tok = *model.tokenizer;
  std::vector<int32_t> ids;
  if (prompt.is_string()) {
    const std::string& text = prompt.get_ref<const std::string&>();
    if (text.empty()) throw_invalid(std::string("\"") + key + "\" is empty");
    if (text.size() > kMaxPromptBytes)
      throw_invalid(std::string("\"") + key + "\" is longer than " + std::to_string(kMaxPromptBytes) +
                    " bytes");
    if (!valid_utf8(text)) throw_invalid(std::string("\"") + key + "\" is not valid UTF-8");
    EncodeOptions options;
    options.add_bos = add_bos.value_or(tok.add_bos_default());
    options.parse_special = parse_special;
    ids = tok.encode(text, options);
  } else if (prompt.is_array()) {
    Json wrapper = {{key, prompt}};
    ids = *read_tokens(wrapper, key, static_cast<uint32_t>(tok.n_vocab()));
    if (add_bos.value_or(false) && tok.bos() >= 0 && (ids.empty() || ids.front() != tok.bos()))
      ids.insert(ids.begin(), tok.bos());
  } else {
    throw_invalid(std::string("\"") + key + "\" must be a string or an array of token ids, not " +
                  prompt.type_name());
  }
  if (ids.empty()) throw_invalid(std::string("\"") + key + "\" is empty");
  return ids;
}

void check_fits(const LoadedModel& model, const engine::GenerateRequest& request) {
  const uint32_t n_ctx = model.engine->info().n_ctx;
  if (request.prompt.size() >= n_ctx)
    throw_invalid("the prompt has " + std::to_string(request.prompt.size()) +
                  " tokens but the context holds " + std::to_string(n_ctx) +
                  " (prompt + at least one generated token)");
}

GenerationStream submit_or_throw(engine::Engine& engine, engine::GenerateRequest request,
                                 const Caller& caller) {
  request.tenant_salt = caller.tenant_salt;
  auto result = engine.submit(std::move(request));
  if (auto* stream = std::get_if<GenerationStream>(&result)) return std::move(*stream);
  const auto& r = std::get<engine::SubmitRejection>(result);
  switch (r.error) {
    case engine::SubmitError::Overloaded:
      throw ApiError(ErrorType::Overloaded, r.message, static_cast<int>(r.retry_after.count()));
    case engine::SubmitError::ShuttingDown:
      throw ApiError(ErrorType::Unavailable, r.message, static_cast<int>(r.retry_after.count()));
    case engine::SubmitError::InvalidRequest:
      throw ApiError(ErrorType::InvalidRequest, r.message);
  }
  throw ApiError(ErrorType::Internal, "unknown submit result");
}

bool pull_chunk(GenerationStream& stream, Chunk& out, const ShouldStop& should_stop) {
  for (;;) {
    switch (stream.next(out, std::chrono::milliseconds(100))) {
      case engine::StreamChannel::Poll::Chunk:
        return true;
      case engine::StreamChannel::Poll::End:
        return false;
      case engine::StreamChannel::Poll::Timeout:
        if (should_stop && should_stop()) return false;
        break;
    }
  }
}

namespace {

// Appends one chunk to a merged one; true when it was the final chunk.
bool merge_chunk(Chunk& all, Chunk& c) {
  all.text += c.text;
  all.tokens.insert(all.tokens.end(), c.tokens.begin(), c.tokens.end());
  for (auto& lp : c.logprobs) all.logprobs.push_back(std::move(lp));
  if (!c.final) return false;
  all.final = std::move(c.final);
  return true;
}

}  // namespace

namespace {

class GenerationBody final : public StreamBody {
 public:
  GenerationBody(GenerationStream stream, ChunkFormatter format, std::string trailer)
      : stream_(std::move(stream)), format_(std::move(format)), trailer_(std::move(trailer)) {}

  bool next(std::string& out, const ShouldStop& should_stop) override {
    if (done_) return false;
    Chunk chunk;
    if (!pull_chunk(stream_, chunk, should_stop)) {
      // The client left or the server stops: dropping the stream (with this body) cancels the generation.
      stream_.cancel();
      done_ = true;
      return false;
    }
    const bool last = chunk.final.has_value();
    out = format_(chunk, last);
    if (last) {
      out += trailer_;
      done_ = true;
      return false;
    }
    return true;
  }

 private:
  GenerationStream stream_;
  ChunkFormatter format_;
  std::string trailer_;
  bool done_ = false;
};

class CollectedBody final : public StreamBody {
 public:
  CollectedBody(GenerationStream stream, CollectedFormatter finish, std::chrono::milliseconds heartbeat)
      : stream_(std::move(stream)), finish_(std::move(finish)), heartbeat_(heartbeat) {}

  bool next(std::string& out, const ShouldStop& should_stop) override {
    if (done_) return false;
    const auto deadline = std::chrono::steady_clock::now() + heartbeat_;
    Chunk c;
    while (std::chrono::steady_clock::now() < deadline) {
      switch (stream_.next(c, std::chrono::milliseconds(100))) {
        case engine::StreamChannel::Poll::Chunk:
          if (merge_chunk(all_, c)) {
            out = finish_(all_);
            done_ = true;
            return false;
          }
          break;
        case engine::StreamChannel::Poll::End:
          done_ = true;
          return false;
        case engine::StreamChannel::Poll::Timeout:
          break;
      }
      if (should_stop && should_stop()) {
        stream_.cancel();
        done_ = true;
        return false;
      }
    }
    out = " ";  // the heartbeat: a write to a client that left fails, and the response (with us) is dropped
    return true;
  }

 private:
  GenerationStream stream_;
  CollectedFormatter finish_;
  std::chrono::milliseconds heartbeat_;
  Chunk all_;
  bool done_ = false;
};

}  // namespace

std::shared_ptr<StreamBody> make_collected_body(GenerationStream stream, CollectedFormatter finish,
                                                std::chrono::milliseconds heartbeat) {
  return std::make_shared<CollectedBody>(std::move(stream), std::move(finish), heartbeat);
}

HttpResponse collected_json(GenerationStream stream, std::function<Json(const Chunk& merged)> build) {
  auto finish = [build = std::move(build)](const Chunk& all) {
    return build(all).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  return HttpResponse::streaming(make_collected_body(std::move(stream), std::move(finish)),
                                 "application/json");
}

std::shared_ptr<StreamBody> make_stream_body(GenerationStream stream, ChunkFormatter format,
                                             std::string trailer) {
  return std::make_shared<GenerationBody>(std::move(stream), std::move(format), std::move(trailer));
}

Json logprobs_json(const std::vector<engine::TokenLogprob>& logprobs) {
  Json arr = Json::array();
  for (const auto& lp : logprobs) {
    Json top = Json::array();
    for (const auto& t : lp.top) top.push_back({{"token", t.token}, {"logprob", t.logprob}});
    arr.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"top", std::move(top)}});
  }
  return arr;
}

}  // namespace kvtrie::server
