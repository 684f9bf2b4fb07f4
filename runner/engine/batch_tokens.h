// Contract: the default token budget of one forward pass (GpuModelOptions::max_batch_tokens,
// GpuEngineConfig::max_batch_tokens, kvtrie serve --batch-tokens). A constant; any thread.
#pragma once
#include <cstdint>

namespace kvtrie::engine {

// Tokens of one forward pass at most, by default: prompts are computed in chunks of this size. Larger chunks
// keep more tensor-core tiles and attention work groups in flight (H100, llama3-8b Q4_0, a 4096-token prompt:
// 9,694 tok/s in chunks of 512, 10,935 of 1024, 11,410 of 2048; docs/BENCHMARKS.md, session 15), at the
// price of activation memory (llama3-8b: 633 MiB of compute buffers at 2048) and of the wait of whatever
// shares the step, which the engine bounds (GpuEngineConfig::shared_step_tokens). llama-server's default
// logical batch (-b) is 2048 tokens too.
inline constexpr uint32_t kDefaultBatchTokens = 2048;
// The budgets the daemon accepts (--batch-tokens, llama-server's -b).
inline constexpr uint32_t kMinBatchTokens = 16, kMaxBatchTokens = 16384;

}  // namespace kvtrie::engine
