// The invariant audit of the prefix trie: every rule written in prefix_trie.h, recomputed from scratch.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "base/error.h"
#include "cache/page_hash.h"
#include "cache/prefix_trie.h"

namespace kvtrie {
namespace {

void count_refs(const std::vector<PageId>& pages, const PagePool& pool, std::vector<std::uint32_t>& refs) {
  for (PageId page : pages) {
    KVTRIE_CHECK(page < pool.capacity(), "trie references a page outside its pool");
    KVTRIE_CHECK(pool.refcount(page) > 0, "trie references a free page");
    KVTRIE_CHECK(++refs[page] == 1, "a page is stored in two nodes");
  }
}

}  // namespace

void PrefixTrie::check_node(const TrieNode* node, std::uint64_t& seen, TrieTotals& recount,
                            std::vector<std::uint32_t>& device_refs, std::vector<std::uint32_t>& host_refs,
                            std::size_t& device_lru, std::size_t& host_lru) const {
  const std::string where = "node #" + std::to_string(node->serial) + ": ";
  ++seen;
  const NodeAccount fresh = fresh_account(node);
  KVTRIE_CHECK(node->account == fresh, where + "cached accounting differs from a recount");
  recount.device_pages += fresh.device_pages;
  recount.host_pages += fresh.host_pages;
  recount.device_evictable += fresh.device_evictable;
  recount.host_evictable += fresh.host_evictable;
  recount.device_protected += fresh.device_protected;
  recount.host_droppable += fresh.host_droppable;
  if (fresh.in_device_lru) {
    KVTRIE_CHECK(device_lru_.count({fresh.lru_tick, node->serial, const_cast<TrieNode*>(node)}) == 1,
                 where + "device-evictable but missing from the device LRU");
    ++device_lru;
  }
  if (fresh.in_host_lru) {
    KVTRIE_CHECK(host_lru_.count({fresh.lru_tick, node->serial, const_cast<TrieNode*>(node)}) == 1,
                 where + "host-evictable but missing from the host LRU");
    ++host_lru;
  }
  count_refs(node->device_pages, device_, device_refs);
  count_refs(node->host_pages, host_, host_refs);

  std::uint64_t child_locks = 0;
  std::vector<std::span<const TokenId>> first_pages;
  for (const auto& owned : node->children) {
    const TrieNode* child = owned.get();
    const std::string at = "node #" + std::to_string(child->serial) + ": ";
    KVTRIE_CHECK(child->parent == node, at + "parent link broken");
    KVTRIE_CHECK(child->ns == node->ns, at + "namespace differs from its parent's");
    KVTRIE_CHECK(child->group == node->group, at + "group differs from its parent's");
    KVTRIE_CHECK(!child->key.empty(), at + "empty key");
    KVTRIE_CHECK(child->end == node->end + child->key.size(), at + "end offset inconsistent");
    KVTRIE_CHECK(child->start() % page_tokens_ == 0, at + "starts off a page boundary");
    KVTRIE_CHECK(child->children.empty() || child->key.size() % page_tokens_ == 0,
                 at + "an inner node ends in a partial page");
    const std::size_t pages = pages_for(child->key.size());
    KVTRIE_CHECK(child->device_pages.empty() || child->device_pages.size() == pages,
                 at + "device pages count");
    KVTRIE_CHECK(child->host_pages.empty() || child->host_pages.size() == pages, at + "host pages count");
    KVTRIE_CHECK(child->on_device() || child->on_host(), at + "resident nowhere");
    KVTRIE_CHECK(child->page_hashes == chained_hashes(child),
                 at + "page hashes differ from its tokens' chain");
    KVTRIE_CHECK(!child->on_device() || node->is_root() || node->on_device(),
                 at + "device-resident under a node that is not");
    if (child->in_transfer()) {
      KVTRIE_CHECK(child->lock_count > 0, at + "mid-transfer but not pinned");
      const bool covered =
          std::any_of(transfer_pins_.begin(), transfer_pins_.end(), [&](const TrieNode* pin) {
            for (const TrieNode* x = pin; x != nullptr; x = x->parent)
              if (x == child) return true;
            return false;
          });
      KVTRIE_CHECK(covered, at + "mid-transfer without a transfer pin below it");
    }
    child_locks += child->lock_count;
    const std::span<const TokenId> first(child->key.data(),
                                         std::min<std::size_t>(page_tokens_, child->key.size()));
    for (const auto& other : first_pages)
      KVTRIE_CHECK(!std::equal(first.begin(), first.end(), other.begin(), other.end()),
                   at + "two children share their first page");
    first_pages.push_back(first);
    check_node(child, seen, recount, device_refs, host_refs, device_lru, host_lru);
  }
  // Each lease on a descendant adds one to every ancestor, so a node holds at least its children's sum.
  KVTRIE_CHECK(node->lock_count >= child_locks + (node->is_root() ? 1 : 0),
               where + "lock count below its children's (a locked node with an unlocked ancestor)");
}

std::vector<PageHash> PrefixTrie::chained_hashes(const TrieNode* node) const {
  std::vector<PageHash> hashes;
  PageHash previous = node->parent->is_root()             ? namespace_page_seed(node->ns)
                      : node->parent->page_hashes.empty() ? 0  // reported at the parent
                                                          : node->parent->page_hashes.back();
  for (std::size_t i = 0; i + page_tokens_ <= node->key.size(); i += page_tokens_) {
    previous = chain_page_hash(previous, std::span(node->key).subspan(i, page_tokens_));
    hashes.push_back(previous);
  }
  return hashes;
}

void PrefixTrie::check_invariants() const {
  TrieTotals recount;
  std::uint64_t seen = 0;
  std::vector<std::uint32_t> device_refs(device_.capacity(), 0), host_refs(host_.capacity(), 0);
  std::size_t device_lru = 0, host_lru = 0;
  for (const auto& [ns, root] : roots_) {
    KVTRIE_CHECK(root && root->is_root() && root->ns == ns, "root of a namespace broken");
    KVTRIE_CHECK(root->key.empty() && !root->on_device() && !root->on_host() && root->end == 0,
                 "a root holds tokens or pages");
    KVTRIE_CHECK(root->lock_count >= 1, "a root lost its permanent lock");
    check_node(root.get(), seen, recount, device_refs, host_refs, device_lru, host_lru);
  }
  recount.nodes = static_cast<std::uint32_t>(seen - roots_.size());
  KVTRIE_CHECK(recount == totals_, "cached totals differ from a recount");
  KVTRIE_CHECK(device_lru == device_lru_.size() && host_lru == host_lru_.size(), "LRU sets hold stale nodes");
  for (const TrieNode* pin : transfer_pins_) KVTRIE_CHECK(pin->lock_count > 0, "a transfer pin is unlocked");
  check_groups();
}

void PrefixTrie::check_groups() const {
  std::unordered_map<GroupId, GroupTotals> recount;
  visit_nodes([&](const TrieNode* node) {
    if (node->group == 0) return;
    const NodeAccount fresh = fresh_account(node);
    GroupTotals& g = recount[node->group];
    g.device_pages += fresh.device_pages;
    if (fresh.in_device_lru) g.device_lru.insert({fresh.lru_tick, node->serial, const_cast<TrieNode*>(node)});
  });
  for (const auto& [group, kept] : groups_) {
    const auto it = recount.find(group);
    const bool empty = it == recount.end();
    KVTRIE_CHECK(kept.device_pages == (empty ? 0 : it->second.device_pages),
                 "group " + std::to_string(group) + ": device pages differ from a recount");
    KVTRIE_CHECK(kept.device_lru == (empty ? std::set<LruKey>{} : it->second.device_lru),
                 "group " + std::to_string(group) + ": device LRU set differs from a recount");
  }
  for (const auto& [group, counted] : recount)
    KVTRIE_CHECK(groups_.count(group) == 1 || (counted.device_pages == 0 && counted.device_lru.empty()),
                 "group " + std::to_string(group) + " is not accounted");
}

void PrefixTrie::visit_nodes(const std::function<void(const TrieNode*)>& visit) const {
  std::vector<const TrieNode*> stack;
  for (const auto& [ns, root] : roots_) stack.push_back(root.get());
  while (!stack.empty()) {
    const TrieNode* node = stack.back();
    stack.pop_back();
    visit(node);
    for (const auto& child : node->children) stack.push_back(child.get());
  }
}

void PrefixTrie::count_page_refs(Tier tier, std::vector<std::uint32_t>& counts) const {
  visit_nodes([&](const TrieNode* node) {
    for (PageId page : tier == Tier::Device ? node->device_pages : node->host_pages) ++counts.at(page);
  });
}

std::vector<bool> PrefixTrie::pinned_device_pages() const {
  std::vector<bool> pinned(device_.capacity(), false);
  visit_nodes([&](const TrieNode* node) {
    if (node->lock_count > 0)
      for (PageId page : node->device_pages) pinned[page] = true;
  });
  return pinned;
}

}  // namespace kvtrie
