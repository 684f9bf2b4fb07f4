// Contract: PrefixTrie maps every cached token prefix to the KV pages that hold it. It is a radix trie
// keyed by token ids (never text), one root per namespace (model/adapter/cache salt: different namespaces
// never share a node). Storage is page-granular: a page holds page_tokens (P) tokens of all layers' K and V.
// Each node holds a run of tokens that starts on a page boundary; its length is a multiple of P except for
// a leaf, which may end in a partial page. Children of a node differ in their first page (first min(P, len)
// tokens); two children may share a few leading tokens, e.g. a partial leaf and a longer sibling.
//
// The trie owns structure and page references, not policy: KvCache decides when to evict, demote and
// promote, through the primitives below. It runs with no GPU: pages are PagePool indices.
//
// Page ownership: the trie holds exactly one reference per page it stores. insert() retains the pages it
// stores and never takes the caller's references: the caller keeps its own and releases them when done, so
// pages the trie did not store (duplicates of data already cached) return to the pool then. demote() and
// begin_promotion() take over the references allocate() returned for the new tier's pages; demote() hands
// the node's device-page references to the caller, which releases them once the copies are complete.
//
// Leases: a Lease pins a node and all its ancestors (lock counts) while a sequence uses their pages.
// Pinned nodes are never evicted, demoted or merged. Leases are move-only; the destructor unpins.
// Merging: when a lease ends, a node drops or is demoted, an unpinned node whose only child is unpinned
// and on the same tier absorbs it (splits made for pins and evictions heal). Pinned nodes are not merged
// because a lease holds its node by address; a tier boundary stays a node boundary.
//
// Invariants (check_invariants() throws kvtrie::Error when one is broken):
//   - every root is locked (a permanent lock) and holds no tokens or pages;
//   - lock_count(node) >= sum of its children's lock counts (so a locked node has locked ancestors);
//   - every node is reachable exactly once, with consistent parent links and end offsets;
//   - a node starts on a page boundary; only a leaf may end in a partial page; keys are non-empty;
//   - children of a node have pairwise distinct first pages; all nodes under a root share its namespace
//     and its group;
//   - a non-root node is resident on device, on host, or both; both only while a promotion is in flight,
//     and such a node is pinned;
//   - a device-resident node has a device-resident parent (the root counts as device-resident): the
//     device-resident part of each tree is a top subtree, the host-only part hangs below it;
//   - device-evictable = unlocked, device-only, no device-resident child (a leaf of the device subtree);
//     host-evictable = unlocked, host-only leaf; protected = device pages of locked nodes; host-droppable =
//     host pages of unlocked host-only nodes. The cached totals and LRU sets equal a fresh recount, and so
//     do each group's device pages and device-evictable LRU set (kept for groups other than 0);
//   - each page is referenced by at most one node, and every referenced page is allocated in its pool;
//   - a node holds one hash per full page of its key, chained from its parent's last page (or from the
//     namespace seed under a root) as cache/page_hash.h defines.
// Events: with an event sink attached, every change of the set of (full-page hash, tier) the trie holds is
// published to it as it happens (cache/kv_event_sink.h); splits and merges change no hash and publish
// nothing. A node's tier is Device while it is resident there (also mid-promotion), else Host.
// Thread model: single owner thread (the scheduler). Pools must outlive the trie; the trie must outlive
// every Lease it issued.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cache/kv_event_sink.h"
#include "cache/page_copier.h"
#include "cache/page_pool.h"
#include "cache/trie_node.h"

namespace kvtrie {

class PrefixTrie;

class Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept : trie_(other.trie_), node_(other.node_), spelled_(other.spelled_) {
    other.node_ = nullptr;
  }
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { reset(); }

  void reset() noexcept;
  bool empty() const { return node_ == nullptr; }
  // Tokens covered by the pinned path (from the root to the end of the pinned node).
  std::uint32_t tokens() const;

 private:
  friend class PrefixTrie;
  Lease(PrefixTrie* trie, TrieNode* node, std::uint32_t spelled)
      : trie_(trie), node_(node), spelled_(spelled) {}
  PrefixTrie* trie_ = nullptr;
  TrieNode* node_ = nullptr;
  // How many of its owner's tokens the path to node_ spells. node_ may hold more (a pin inside a node), and
  // other owners may extend it later and split it (node_ keeps the tail), so ancestors of node_ that end
  // beyond this may hold other tokens; the path's first spelled_ tokens never change.
  std::uint32_t spelled_ = 0;
};

struct PageRef {
  PageId page;
  Tier tier;  // Device when the page is resident there (also mid-promotion), else Host
  bool operator==(const PageRef&) const = default;
};

struct MatchResult {
  std::uint32_t matched_tokens = 0;  // token-exact length of the longest cached prefix
  std::vector<PageRef> pages;        // ceil(matched_tokens / P) pages holding it, in order
  TrieNode* last_node = nullptr;     // node holding the last matched token (the root when none)
  std::uint32_t device_tokens = 0;   // matched tokens on device-resident nodes
  std::uint32_t host_tokens = 0;     // matched tokens on host-only nodes
  // Of `pages`, the device pages of nodes no lease pins: pinning the match takes them out of the evictable
  // set (the scheduler's admission cost).
  std::uint32_t unpinned_device_pages = 0;
  // matched_tokens % P: the last page is shared with the trie and only partly reused; the caller must copy
  // it to a page of its own before writing the next token into it (copy-on-write).
  std::uint32_t tail_tokens = 0;
  bool copy_on_write() const { return tail_tokens != 0; }
};

struct TrieTotals {
  std::uint32_t nodes = 0;  // non-root nodes
  std::uint32_t device_pages = 0;
  std::uint32_t host_pages = 0;
  std::uint32_t device_evictable = 0;
  std::uint32_t host_evictable = 0;
  std::uint32_t device_protected = 0;
  std::uint32_t host_droppable = 0;
  bool operator==(const TrieTotals&) const = default;
};

// Every full page the trie holds, by tier (a node mid-promotion counts as Device), in no particular order.
struct PageHashListing {
  std::vector<PageHash> device;
  std::vector<PageHash> host;
};

// One full page of a node, for the disk tier: its hash, its tokens and where its bytes are now.
struct FullPage {
  PageHash hash = 0;
  std::optional<PageHash> parent;   // the page before it (nullopt for a namespace's first page)
  std::span<const TokenId> tokens;  // P tokens, valid until the next mutation of the trie
  PageRef page;
};

struct DroppedPages {
  std::uint32_t device = 0;
  std::uint32_t host = 0;
};

class PrefixTrie {
 public:
  PrefixTrie(PagePool& device, PagePool& host, std::uint32_t page_tokens);
  ~PrefixTrie();  // releases the trie's page references; every Lease must be gone by then
  PrefixTrie(const PrefixTrie&) = delete;
  PrefixTrie& operator=(const PrefixTrie&) = delete;

  std::uint32_t page_tokens() const { return page_tokens_; }

  // Longest cached prefix of tokens in namespace ns. Pure: no LRU update, no split.
  MatchResult match(NamespaceId ns, std::span<const TokenId> tokens) const;
  // Pins the path holding the first n tokens (n <= match(ns, tokens).matched_tokens), marks it used now,
  // and splits the last node at the page boundary after token n so the pin covers no more pages than
  // needed. n == 0 pins the root. `group` owns namespace ns: the first pin of ns records it (a namespace
  // never changes group; a different one is a broken invariant).
  Lease pin(NamespaceId ns, std::span<const TokenId> tokens, std::uint32_t n, GroupId group = 0);
  // Caches tokens whose KV was computed into device_pages (ceil(tokens.size() / P) pages, the caller's
  // page table). Shares what is already cached, splits nodes at page boundaries, takes one reference per
  // page it stores, and returns a lease on the node holding the last token (the root for no tokens).
  // Host-only nodes the tokens fully cover adopt the caller's device pages (their host copy is dropped).
  // A partial leaf the tokens extend takes the caller's fuller page for its last page. The insert stops
  // early at a partial leaf mid-promotion (nothing is lost but the extension).
  // `from`, when given, is a lease this caller holds on a prefix of the same tokens (its previous pin or
  // insert): the walk starts at the deepest node of its path that holds only the caller's tokens instead
  // of the root, so committing one decode step costs O(tokens of the last node), not O(sequence length).
  Lease insert(NamespaceId ns, std::span<const TokenId> tokens, std::span<const PageId> device_pages,
               const Lease* from = nullptr);

  // Path queries on a lease (root first).
  std::vector<PageRef> path_pages(const Lease& lease) const;
  std::uint32_t host_only_pages_on_path(const Lease& lease) const;
  // End of the deepest device-resident node on the path (page-aligned unless it is the leased leaf).
  std::uint32_t device_tokens_on_path(const Lease& lease) const;

  // Promotion: the host-only nodes of the leased path take device_pages (one per host-only page, root
  // first) and stay resident on both tiers, pinned, until finish_transfers(). Returns the copies to queue.
  std::vector<PageCopy> begin_promotion(const Lease& lease, std::span<const PageId> device_pages);
  // After the copier's wait(): promoted nodes release their host pages and their transfer pins.
  void finish_transfers();
  bool transfers_pending() const { return !transfer_pins_.empty(); }

  // Eviction primitives (victims are opaque handles, valid until the next mutation).
  TrieNode* coldest_device_evictable() const;
  // The coldest device-evictable node of one group (nullptr when it has none, or for group 0).
  TrieNode* coldest_device_evictable(GroupId group) const;
  // Device pages the trie stores for a group (0 for group 0, which is not counted).
  std::uint32_t group_device_pages(GroupId group) const;
  TrieNode* coldest_host_evictable() const;
  std::uint32_t node_pages(const TrieNode* node) const;
  // Splits an evictable node so that the returned node (the same handle) keeps only its last `pages` pages.
  TrieNode* split_tail(TrieNode* node, std::uint32_t pages);
  // A device-evictable node moves to host_pages (one per page; the trie takes over the references that
  // allocate() returned, as begin_promotion does for its device pages). Returns
  // its device pages, whose references now belong to the caller. May merge the node away.
  std::vector<PageId> demote(TrieNode* node, std::span<const PageId> host_pages);
  // Removes an unlocked node and its whole subtree, releasing the trie's references.
  DroppedPages drop(TrieNode* node);

  // Disk tier. The full pages of a node (a partial last page has no hash and is left out).
  std::vector<FullPage> full_pages(const TrieNode* node) const;
  // Hangs a host-only leaf holding `tokens` (whole pages) in host_pages (one each; the trie takes over the
  // references allocate() returned) below the leased node, which must end on a page boundary where no child
  // holds the first of those pages. Returns the new leaf's page hashes (chained from the leased node).
  // Whether a child of the leased node holds `page` (P tokens) as its first page: add_host_leaf() of a run
  // starting with it would be refused.
  bool has_child_page(const Lease& at, std::span<const TokenId> page) const;
  std::vector<PageHash> add_host_leaf(const Lease& at, std::span<const TokenId> tokens,
                                      std::span<const PageId> host_pages);

  // Publishes every later change to sink (nullptr: none). The sink must outlive the trie or be detached.
  void set_event_sink(KvEventSink* sink) { sink_ = sink; }
  KvEventSink* event_sink() const { return sink_; }
  PageHashListing page_hashes() const;

  const TrieTotals& totals() const { return totals_; }
  std::uint64_t leases_outstanding() const { return leases_; }
  // Adds, per page of the tier, the number of trie references (for pool refcount audits).
  void count_page_refs(Tier tier, std::vector<std::uint32_t>& counts) const;
  // Per device page: true when a locked (pinned) node stores it.
  std::vector<bool> pinned_device_pages() const;
  void check_invariants() const;

 private:
  friend class Lease;
  using LruKey = std::tuple<std::uint64_t, std::uint64_t, TrieNode*>;  // (tick, serial, node)
  struct GroupTotals {
    std::uint32_t device_pages = 0;
    std::set<LruKey> device_lru;  // the group's device-evictable nodes, coldest first
  };

  TrieNode* root(NamespaceId ns, GroupId group = 0);
  const TrieNode* find_root(NamespaceId ns) const;
  std::uint32_t pages_for(std::size_t tokens) const;
  std::unique_ptr<TrieNode> make_node(TrieNode* parent);
  TrieNode* add_leaf(TrieNode* parent, std::span<const TokenId> key, std::span<const PageId> pages);
  TrieNode* split(TrieNode* node, std::uint32_t at);
  void maybe_merge(TrieNode* node);
  void release_pages(TrieNode* node, DroppedPages& dropped);
  void lock_path(TrieNode* node);
  void unlock_path(TrieNode* node) noexcept;
  void touch_path(TrieNode* node);
  NodeAccount fresh_account(const TrieNode* node) const;
  void reaccount(TrieNode* node);
  void unaccount(TrieNode* node);
  void check_groups() const;
  std::vector<PageHash> chained_hashes(const TrieNode* node) const;           // recomputed from the tokens
  void visit_nodes(const std::function<void(const TrieNode*)>& visit) const;  // every node, roots included
  // Events (prefix_trie_events.cpp). The hash chain's value before node's first page.
  PageHash hash_before(const TrieNode* node) const;
  // Hashes node's full pages that have none yet; returns the index of the first page it hashed.
  std::size_t hash_new_pages(TrieNode* node);
  // Stored event for node's full pages from first_page on, on tier (nothing without a sink or such pages).
  void publish_stored(const TrieNode* node, std::size_t first_page, Tier tier);
  void publish_removed(std::vector<PageHash> hashes, Tier tier);
  // Removed on the node's old tier, then Stored on the new one.
  void publish_move(const TrieNode* node, Tier from, Tier to);
  void check_node(const TrieNode* node, std::uint64_t& seen, TrieTotals& recount,
                  std::vector<std::uint32_t>& device_refs, std::vector<std::uint32_t>& host_refs,
                  std::size_t& device_lru, std::size_t& host_lru) const;

  PagePool& device_;
  PagePool& host_;
  std::uint32_t page_tokens_;
  std::map<NamespaceId, std::unique_ptr<TrieNode>> roots_;
  std::set<LruKey> device_lru_;                      // device-evictable nodes, coldest first
  std::set<LruKey> host_lru_;                        // host-evictable nodes, coldest first
  std::unordered_map<GroupId, GroupTotals> groups_;  // per group but 0: what the device-tier share needs
  std::vector<TrieNode*> transfer_pins_;             // nodes pinned by an in-flight promotion
  TrieTotals totals_;
  KvEventSink* sink_ = nullptr;
  std::uint64_t tick_ = 0;
  std::uint64_t next_serial_ = 0;
  std::uint64_t leases_ = 0;
};

}  // namespace kvtrie
