// Contract: what every generation API shares once its request is parsed (server/generate_request.h):
// submitting to the engine (a rejection becomes the matching ApiError), and the StreamBody that pulls a
// GenerationStream and formats each chunk in the API's own wire format. Handlers call these from HTTP worker
// threads; the LoadedModel must outlive the returned streams (the daemon stops the HTTP server before
// destroying the model).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runner/engine/engine.h"
#include "server/generate_request.h"
#include "server/http_types.h"
#include "server/model_host.h"
#include "server/request_json.h"

namespace kvtrie::server {

// The parts of the model request parsing (server/generate_request.h) reads.
RequestModel request_model(const LoadedModel& model);

// Submits on behalf of `caller`, whose tenant salt keeps its cached prefixes apart from every other tenant's.
engine::GenerationStream submit_or_throw(engine::Engine& engine, engine::GenerateRequest request,
                                         const Caller& caller);

// Waits for the next chunk in short slices, polling should_stop between them; false when it fired.
bool pull_chunk(engine::GenerationStream& stream, engine::Chunk& out, const ShouldStop& should_stop);

// Formats each chunk into the bytes to send; `last` is true for the final chunk. `trailer` (may be empty) is
// sent after the final chunk (SSE's "data: [DONE]").
using ChunkFormatter = std::function<std::string(const engine::Chunk& chunk, bool last)>;
std::shared_ptr<StreamBody> make_stream_body(engine::GenerationStream stream, ChunkFormatter format,
                                             std::string trailer = {});

// A non-streaming answer that still notices a client that hangs up: the chunks are merged (text, tokens and
// logprobs concatenated, final kept) and `finish(merged)` is the whole body, sent at the end; until then a
// single space goes out every `heartbeat` (JSON allows leading white space), and a write that fails cancels
// the generation.
using CollectedFormatter = std::function<std::string(const engine::Chunk& merged)>;
std::shared_ptr<StreamBody> make_collected_body(
    engine::GenerationStream stream, CollectedFormatter finish,
    std::chrono::milliseconds heartbeat = std::chrono::seconds(1));

// The non-streaming answer of a generation: make_collected_body() with `build(merged)` as the JSON body.
HttpResponse collected_json(engine::GenerationStream stream,
                            std::function<Json(const engine::Chunk& merged)> build);

// The JSON of logprob entries as SPEC 5 writes them: {"token", "logprob", "top": [{"token", "logprob"}]}.
Json logprobs_json(const std::vector<engine::TokenLogprob>& logprobs);

}  // namespace kvtrie::server
