// Contract: what the cache tells a KV-event consumer (a publisher for prefix-aware routers) about the pages
// it holds, in vLLM's vocabulary: one block is one full page, named by its chained hash (cache/page_hash.h).
// Pages enter a tier (Stored), leave it (Removed), or everything goes (Cleared). A move between tiers is a
// Removed on the old tier followed by a Stored on the new one, in that order, so a consumer that ignores the
// tier never loses the page. Partial pages (a leaf's unfinished last page) are never published: routers
// match whole blocks. Replaying every event in order onto an empty set of (hash, tier) gives exactly the
// pages the cache holds (PrefixTrie::page_hashes()) on the device and host tiers, and no event stores a
// (hash, tier) already held or removes one not held. Tier::Disk events tell of the disk tier's pages, as far
// as this run knows them (cache/kv_cache.h says when).
//
// Threads: the cache calls publish() on its owner thread (the engine's), in the order the changes happen;
// an implementation must return at once (never block on I/O: queue, or drop and count). The sink must
// outlive the cache it is attached to.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "cache/page_pool.h"
#include "cache/trie_node.h"

namespace kvtrie {

struct KvEvent {
  enum class Kind : std::uint8_t { Stored, Removed, Cleared };
  Kind kind = Kind::Cleared;
  Tier tier = Tier::Device;
  std::vector<PageHash> hashes;  // Stored, Removed: consecutive pages of one prefix for Stored
  // Stored: the page before hashes[0] (nullopt for a namespace's first page), and the token ids of every
  // page, page_tokens per hash.
  std::optional<PageHash> parent;
  std::vector<TokenId> tokens;
  std::uint32_t page_tokens = 0;
};

class KvEventSink {
 public:
  virtual ~KvEventSink() = default;
  virtual void publish(KvEvent event) = 0;
};

}  // namespace kvtrie
