// Contract: the output of one generation request. A StreamChannel is shared by its two ends: the engine
// thread pushes Chunks (push / finish) and reads cancelled(); the consumer holds a GenerationStream, the
// move- only RAII reader, and pulls with next(). Destroying (or cancel()ing) the reader marks the channel
// cancelled, which the engine sees at its next step. Both ends are thread-safe; a chunk pushed after finish()
// is dropped. The channel lives as long as either end (shared ownership), so neither end has to outlive the
// other.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kvtrie::engine {

// Why a generation ended. done_reason "stop" covers Eos and StopString; "length" is Length.
enum class StopKind {
  Eos,         // the model produced an end-of-generation token (not emitted)
  StopString,  // a stop string matched (the text from the match on is not emitted)
  Length,      // max_tokens or the context size was reached
  Cancelled,   // the client went away, or shutdown cancelled it
};
const char* done_reason_name(StopKind kind);  // "stop" | "length" | "cancelled"

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// One generated token's log-probability (log-softmax of the raw logits, before any sampling transform)
// and the `logprobs` most likely alternatives, most likely first.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<TopLogprob> top;
};

struct GenerationStats {
  StopKind stop_kind = StopKind::Length;
  std::string stop_string;  // the stop string that matched (StopKind::StopString)
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;  // prompt tokens served from the cache (device + host + disk)
  uint32_t cached_tokens_device = 0;
  uint32_t cached_tokens_host = 0;
  uint32_t cached_tokens_disk = 0;  // read from the disk tier (then promoted through host memory)
  uint32_t completion_tokens = 0;   // tokens generated (not the end-of-generation token that stopped it)
  double ttft_ms = 0;               // submit -> first token sampled (queueing included)
  double prompt_ms = 0;             // time computing the uncached prompt tokens
  double decode_ms = 0;             // first token sampled -> end
  double tokens_per_second = 0;     // completion tokens after the first / decode seconds (0 when undefined)
};

// A piece of output: the tokens sampled since the previous chunk and the text that became final with them
// (UTF-8 complete, stop-string safe). The last chunk of a stream carries `final`.
struct Chunk {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // one per token when the request asked for logprobs
  std::optional<GenerationStats> final;
};

class StreamChannel {
 public:
  // Producer side (engine thread).
  void push(Chunk chunk);
  void finish(Chunk last);  // `last.final` must be set; wakes the reader
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool finished() const;

  // Consumer side.
  enum class Poll { Chunk, Timeout, End };
  Poll next(Chunk& out, std::chrono::milliseconds timeout);
  void cancel();

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Chunk> chunks_;
  bool finished_ = false;   // finish() was called
  bool delivered_ = false;  // the final chunk was handed to the reader
  std::atomic<bool> cancelled_{false};
};

class GenerationStream {
 public:
  explicit GenerationStream(std::shared_ptr<StreamChannel> channel) : channel_(std::move(channel)) {}
  GenerationStream(GenerationStream&&) noexcept = default;
  GenerationStream& operator=(GenerationStream&& other) noexcept;
  GenerationStream(const GenerationStream&) = delete;
  GenerationStream& operator=(const GenerationStream&) = delete;
  ~GenerationStream();

  // Waits up to `timeout` for the next chunk. Chunk: `out` holds it (out.final set on the last one);
  // Timeout: nothing yet; End: the final chunk was already returned (or the stream was moved from).
  StreamChannel::Poll next(Chunk& out, std::chrono::milliseconds timeout);
  // Cancels the generation now; the final chunk (done_reason "cancelled") may still be pulled.
  void cancel();

 private:
  std::shared_ptr<StreamChannel> channel_;
};

}  // namespace kvtrie::engine
