#include "server/generate_common.h"

#include <spdlog/spdlog.h>

#include <thread>

namespace kvtrie::server {

using engine::Chunk;
using engine::GenerationStream;

RequestModel request_model(const LoadedModel& model) {
  return {*model.tokenizer, model.engine->info().n_ctx, model.chat_format};
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
    // The heartbeat: a write to a client that left fails, and the response (with us) is dropped. assign(1, '
    // ') rather than = " ": GCC 12 at -O2 reports a false -Wrestrict overlap for the latter here (GCC bug
    // 105329).
    out.assign(1, ' ');
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
