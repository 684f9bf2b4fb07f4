#include "runner/engine/admission.h"

#include <algorithm>

namespace kvtrie::engine {

uint32_t pages_for_tokens(uint64_t tokens, uint32_t page_tokens) {
  return static_cast<uint32_t>((tokens + page_tokens - 1) / page_tokens);
}

uint32_t step_prefill_budget(uint32_t max_batch, uint32_t decodes, uint32_t prompts, uint32_t shared) {
  const uint32_t step = decodes == 0 && prompts <= 1 ? max_batch : std::min(max_batch, shared);
  return step - std::min(decodes, step);
}

uint32_t max_sequence_tokens(size_t prompt_tokens, int32_t max_tokens, uint32_t n_ctx) {
  const uint64_t wanted = max_tokens < 0 ? n_ctx : prompt_tokens + static_cast<uint64_t>(max_tokens);
  return static_cast<uint32_t>(std::min<uint64_t>(wanted, n_ctx));
}

std::optional<std::string> never_fits(size_t prompt_tokens, int32_t max_tokens, uint32_t n_ctx,
                                      uint32_t page_tokens, uint32_t device_pages) {
  // One page of slack: until its first commit, a sequence that reused part of a cached page holds both that
  // page (pinned) and its own copy of it.
  const uint32_t longest = max_sequence_tokens(prompt_tokens, max_tokens, n_ctx);
  const uint64_t room = device_pages > 0 ? uint64_t{device_pages - 1} * page_tokens : 0;
  if (longest <= room) return std::nullopt;
  return "the request needs KV room for up to " + std::to_string(longest) + " tokens (prompt " +
         std::to_string(prompt_tokens) + " + max_tokens), more than the whole device KV tier holds for " +
         "one request (" + std::to_string(room) +
         " tokens): lower max_tokens or the prompt, or raise --kv-device-mb";
}

uint32_t promised_pages(uint32_t tokens, uint32_t max_tokens_total, uint32_t page_tokens) {
  // One page of growth, so that a sequence just admitted can decode for a while before it competes for room.
  const uint32_t longest = pages_for_tokens(std::max(tokens, max_tokens_total), page_tokens);
  return std::min(pages_for_tokens(tokens, page_tokens) + 1, longest);
}

uint32_t outstanding_pages(uint32_t tokens, uint32_t max_tokens_total, uint32_t table_pages,
                           uint32_t page_tokens) {
  const uint32_t promised = promised_pages(tokens, max_tokens_total, page_tokens);
  return promised > table_pages ? promised - table_pages : 0;
}

uint32_t admission_cost(const AdmissionInput& in, uint32_t page_tokens) {
  const uint32_t promised = promised_pages(in.tokens, in.max_tokens_total, page_tokens);
  // A partly reused last page is copied on write, so only whole device pages are shared.
  const uint32_t shared = std::min(in.device_reused_tokens / page_tokens, promised);
  const bool partial_promotion =
      in.host_reused_tokens > 0 && (in.device_reused_tokens + in.host_reused_tokens) % page_tokens != 0;
  return promised - shared + in.unpinned_device_pages + (partial_promotion ? 1 : 0);
}

bool may_start(uint32_t cost, uint32_t reclaimable, uint64_t outstanding_total, bool nothing_running) {
  return nothing_running || uint64_t{cost} + outstanding_total <= reclaimable;
}

}  // namespace kvtrie::engine
