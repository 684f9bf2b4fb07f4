// Contract: the GpuEngine scheduler's memory rules for the KV device tier, as arithmetic on page counts (no
// GPU, no cache): whether a request can ever run, what starting it takes from the device tier, what each
// running sequence is promised, and whether the head of the queue may start now; and how many prompt tokens
// a step may compute. The engine feeds it numbers
// from KvCache (reclaimable_device_pages(), preview_acquire(), page tables); tests drive it directly. Pure
// functions, safe from any thread.
//
// The rules (vLLM/SGLang style):
//   - A request whose longest sequence (prompt + max_tokens, capped at the context) needs more pages than the
//     whole device tier less one (the copy-on-write slack) can never run: it is rejected at submit
//     (never_fits), not cancelled midway.
//   - Every running sequence is promised the pages of the tokens it holds plus one page of growth (never more
//     than its longest sequence needs). Pages promised but not yet in its page table are "outstanding".
//   - The head of the queue starts when its cost (fresh pages for its uncached part and one page of growth,
//     plus the cached device pages it would pin that nobody pins now) fits in the reclaimable device pages
//     (free + unpinned cached) minus every running sequence's outstanding pages; or when nothing runs (it
//     then fits, since it passed never_fits).
//   - Strict FIFO: while the head waits, nothing behind it starts (a small request never overtakes a big one,
//     so the head cannot starve: no new work starts until it does, and running sequences end). Requests
//     deferred to share a prefix another request is still computing are the one exception: they step aside
//     for a step or two, and do not block the queue.
//   - Growth beyond the promise is not reserved: when a running sequence finds no page, the scheduler
//     preempts the newest running sequence (by arrival), which keeps its computed prefix in the trie and
//     goes back to the head of the queue.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvtrie::engine {

uint32_t pages_for_tokens(uint64_t tokens, uint32_t page_tokens);

// Prompt tokens one step may compute, with `decodes` sequences decoding and `prompts` sequences computing
// their prompts: a lone prompt (nothing decodes, no other prompt) takes a step of `max_batch` tokens, else
// the step is at most `shared` tokens and the prompts get what the decodes leave of it. A step's length is
// every decoding stream's pause and every other prompt's wait, so only a prompt that keeps nobody waiting
// takes large chunks; and a shared step stays within `shared` tokens in all, decodes included: the products'
// tensor-core tiles are 128 tokens wide (kernels::kF16XTile), so a step of 513 tokens costs one of 640.
uint32_t step_prefill_budget(uint32_t max_batch, uint32_t decodes, uint32_t prompts, uint32_t shared);

// Tokens a request may hold at most: prompt + max_tokens (-1: up to the context), capped at the context.
uint32_t max_sequence_tokens(size_t prompt_tokens, int32_t max_tokens, uint32_t n_ctx);

// Why a request can never run on a device tier of `device_pages` pages (a message for a 400 answer), or
// nullopt when it fits.
std::optional<std::string> never_fits(size_t prompt_tokens, int32_t max_tokens, uint32_t n_ctx,
                                      uint32_t page_tokens, uint32_t device_pages);

// Pages promised to a sequence holding `tokens` tokens whose longest sequence is `max_tokens_total`.
uint32_t promised_pages(uint32_t tokens, uint32_t max_tokens_total, uint32_t page_tokens);

// Promised pages a running sequence does not hold yet.
uint32_t outstanding_pages(uint32_t tokens, uint32_t max_tokens_total, uint32_t table_pages,
                           uint32_t page_tokens);

// A waiting request as the cache sees it now (KvCache::preview_acquire of its tokens).
struct AdmissionInput {
  uint32_t tokens = 0;                 // tokens it starts with: the prompt, or prompt + generated on resume
  uint32_t max_tokens_total = 0;       // max_sequence_tokens
  uint32_t device_reused_tokens = 0;   // of its tokens, cached on device (reused without a copy)
  uint32_t host_reused_tokens = 0;     // of its tokens, cached on host (promoted: copied to device pages)
  uint32_t unpinned_device_pages = 0;  // device pages it would pin that no running sequence pins now
};

// Reclaimable device pages the request takes when it starts: its promise less the whole device pages it
// shares, plus the pages it pins out of the reclaimable set, plus one when a promoted host page is only
// partly reused (the promoted page stays in the trie beside the sequence's copy-on-write copy). An upper
// bound of what acquire() and reserve() of its promise take.
uint32_t admission_cost(const AdmissionInput& input, uint32_t page_tokens);

// Whether the head of the queue may start now.
bool may_start(uint32_t cost, uint32_t reclaimable, uint64_t outstanding_total, bool nothing_running);

}  // namespace kvtrie::engine
