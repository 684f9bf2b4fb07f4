#include "runner/engine/kv_tier_sizing.h"

#include <algorithm>

namespace kvtrie::engine {

KvTierSizes size_kv_tiers(const KvTierInputs& in) {
  KvTierSizes out;
  out.pages_per_sequence = (uint64_t{in.n_ctx} + in.page_tokens - 1) / in.page_tokens;
  out.wanted_device_pages = in.kv_device_bytes ? in.kv_device_bytes / in.page_bytes
                                               : std::max(2 * uint64_t{in.parallel} * out.pages_per_sequence,
                                                          in.device_local_free / 4 / in.page_bytes);
  const uint64_t bindable = std::min<uint64_t>(in.pages_per_binding * in.max_bindings, UINT32_MAX);
  out.device_pages = static_cast<uint32_t>(std::min(out.wanted_device_pages, bindable));
  out.host_pages = static_cast<uint32_t>(std::min<uint64_t>(
      in.kv_host_bytes ? in.kv_host_bytes / in.page_bytes : 2 * uint64_t{out.device_pages}, UINT32_MAX));
  return out;
}

}  // namespace kvtrie::engine
