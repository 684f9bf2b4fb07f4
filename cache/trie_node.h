// Contract: TrieNode is the private node type of PrefixTrie, visible to callers only as an opaque handle
// (victims returned by PrefixTrie::coldest_*_evictable). Only prefix_trie*.cpp reads or writes its fields;
// PrefixTrie owns every node (children through unique_ptr). Same thread rules as PrefixTrie.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "cache/page_pool.h"

namespace kvtrie {

using TokenId = std::int32_t;
using NamespaceId = std::uint64_t;
// Who owns a namespace's pages for the device-tier share (a tenant); 0: nobody, no share applies. Several
// namespaces may belong to one group.
using GroupId = std::uint64_t;
// The chained hash that names a full page and its whole prefix (cache/page_hash.h).
using PageHash = std::uint64_t;

// What one node currently contributes to the trie's cached totals and LRU sets. Kept on the node so that
// an update subtracts exactly what was added (check_invariants compares it with a fresh recount).
struct NodeAccount {
  std::uint32_t device_pages = 0;
  std::uint32_t host_pages = 0;
  std::uint32_t device_evictable = 0;  // pages of a device-evictable node
  std::uint32_t host_evictable = 0;    // pages of a host-evictable node
  std::uint32_t device_protected = 0;  // device pages of a locked node
  std::uint32_t host_droppable = 0;    // host pages of an unlocked host-only node
  bool in_device_lru = false;
  bool in_host_lru = false;
  std::uint64_t lru_tick = 0;  // the tick under which the node sits in an LRU set
  bool operator==(const NodeAccount&) const = default;
};

struct TrieNode {
  NamespaceId ns = 0;
  GroupId group = 0;         // its root's
  std::vector<TokenId> key;  // this edge's tokens; empty only at a root
  std::uint32_t end = 0;     // tokens from the root to the end of key; end - key.size() is page-aligned
  std::vector<PageId> device_pages;   // one per page of key when resident on device, else empty
  std::vector<PageId> host_pages;     // one per page of key when resident on host, else empty
  std::vector<PageHash> page_hashes;  // one per full page of key (a partial last page has none)
  TrieNode* parent = nullptr;
  std::vector<std::unique_ptr<TrieNode>> children;
  std::uint64_t last_use = 0;  // trie tick of the last match/insert through this node
  std::uint32_t lock_count = 0;
  std::uint64_t serial = 0;  // creation order; breaks LRU ties deterministically
  NodeAccount account;

  bool is_root() const { return parent == nullptr; }
  bool on_device() const { return !device_pages.empty(); }
  bool on_host() const { return !host_pages.empty(); }
  bool in_transfer() const { return on_device() && on_host(); }
  std::uint32_t start() const { return end - static_cast<std::uint32_t>(key.size()); }
};

}  // namespace kvtrie
