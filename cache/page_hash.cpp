#include "cache/page_hash.h"

#include <xxhash.h>

#include <bit>

namespace kvtrie {

static_assert(std::endian::native == std::endian::little, "page hashes are defined over little-endian bytes");

PageHash namespace_page_seed(NamespaceId ns) {
  return XXH3_64bits_withSeed(&ns, sizeof ns, kPageHashSeed);
}

PageHash chain_page_hash(PageHash previous, std::span<const TokenId> page_tokens) {
  return XXH3_64bits_withSeed(page_tokens.data(), page_tokens.size_bytes(), previous);
}

}  // namespace kvtrie
