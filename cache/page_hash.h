// Contract: the identity of a cached page across processes: a 64-bit hash chained from the namespace through
// every full page of the prefix that ends with it, so the same tokens in two namespaces (tenants, cache
// salts) never get the same hash and a page's hash names its whole prefix. The KV events for routers
// (cache/kv_event_sink.h) and the /cache page listing publish these hashes. Pure functions, any thread.
//
// Definition (stable: routers and tests rely on it): the seed of a namespace is XXH3-64 of its NamespaceId
// (8 bytes, little-endian) with seed kPageHashSeed; page i's hash is XXH3-64 of its P token ids (int32,
// little-endian) seeded with page i-1's hash (page 0: the namespace seed). Only full pages have a hash.
#pragma once
#include <cstdint>
#include <span>

#include "cache/trie_node.h"

namespace kvtrie {

inline constexpr std::uint64_t kPageHashSeed = 0x6b76747269652d31ULL;  // "kvtrie-1"

PageHash namespace_page_seed(NamespaceId ns);
PageHash chain_page_hash(PageHash previous, std::span<const TokenId> page_tokens);

}  // namespace kvtrie
