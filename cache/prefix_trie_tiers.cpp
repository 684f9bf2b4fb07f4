// Tier moves and eviction primitives of the prefix trie. The policy (when, how much, demote or drop) lives
// in KvCache; these functions only keep the structure, the page references and the accounting exact.
#include <algorithm>
#include <string>

#include "base/error.h"
#include "cache/prefix_trie.h"

namespace kvtrie {
namespace {

std::vector<const TrieNode*> path_of(const TrieNode* node) {
  std::vector<const TrieNode*> path;
  for (const TrieNode* x = node; x != nullptr && !x->is_root(); x = x->parent) path.push_back(x);
  std::reverse(path.begin(), path.end());
  return path;
}

}  // namespace

std::vector<PageRef> PrefixTrie::path_pages(const Lease& lease) const {
  std::vector<PageRef> pages;
  for (const TrieNode* node : path_of(lease.node_)) {
    if (node->on_device()) {
      for (PageId page : node->device_pages) pages.push_back({page, Tier::Device});
    } else {
      for (PageId page : node->host_pages) pages.push_back({page, Tier::Host});
    }
  }
  return pages;
}

std::uint32_t PrefixTrie::host_only_pages_on_path(const Lease& lease) const {
  std::uint32_t pages = 0;
  for (const TrieNode* node : path_of(lease.node_))
    if (!node->on_device()) pages += static_cast<std::uint32_t>(node->host_pages.size());
  return pages;
}

std::uint32_t PrefixTrie::device_tokens_on_path(const Lease& lease) const {
  std::uint32_t tokens = 0;
  for (const TrieNode* node : path_of(lease.node_)) {
    if (!node->on_device()) break;
    tokens = node->end;
  }
  return tokens;
}

std::vector<PageCopy> PrefixTrie::begin_promotion(const Lease& lease, std::span<const PageId> device_pages) {
  KVTRIE_CHECK(!lease.empty() && lease.trie_ == this, "promotion needs a lease of this trie");
  KVTRIE_CHECK(device_pages.size() == host_only_pages_on_path(lease), "one device page per host-only page");
  std::vector<PageCopy> copies;
  std::size_t next = 0;
  // Root first, so that every node that gains device pages already has a device-resident parent.
  for (const TrieNode* constant : path_of(lease.node_)) {
    TrieNode* node = const_cast<TrieNode*>(constant);  // path_of is shared with the const queries
    if (node->on_device()) continue;
    for (PageId host_page : node->host_pages) {
      node->device_pages.push_back(device_pages[next]);
      copies.push_back({Tier::Host, host_page, Tier::Device, device_pages[next]});
      ++next;
    }
    reaccount(node);
    reaccount(node->parent);
    publish_move(node, Tier::Host, Tier::Device);
  }
  if (!copies.empty()) {
    // The transfer pin keeps the path resident on both tiers until finish_transfers(), even if the
    // sequence that asked for it is released first.
    lock_path(lease.node_);
    transfer_pins_.push_back(lease.node_);
  }
  return copies;
}

void PrefixTrie::finish_transfers() {
  for (TrieNode* pin : transfer_pins_) {
    for (TrieNode* x = pin; x != nullptr; x = x->parent) {
      if (!x->in_transfer()) continue;
      for (PageId page : x->host_pages) host_.release(page);
      x->host_pages.clear();
      reaccount(x);
    }
  }
  std::vector<TrieNode*> pins = std::move(transfer_pins_);
  transfer_pins_.clear();
  for (TrieNode* pin : pins) unlock_path(pin);
}

TrieNode* PrefixTrie::coldest_device_evictable() const {
  return device_lru_.empty() ? nullptr : std::get<2>(*device_lru_.begin());
}

TrieNode* PrefixTrie::coldest_device_evictable(GroupId group) const {
  auto it = groups_.find(group);
  return it == groups_.end() || it->second.device_lru.empty() ? nullptr
                                                              : std::get<2>(*it->second.device_lru.begin());
}

std::uint32_t PrefixTrie::group_device_pages(GroupId group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second.device_pages;
}

TrieNode* PrefixTrie::coldest_host_evictable() const {
  return host_lru_.empty() ? nullptr : std::get<2>(*host_lru_.begin());
}

TrieNode* PrefixTrie::split_tail(TrieNode* node, std::uint32_t pages) {
  const std::uint32_t total = node_pages(node);
  KVTRIE_CHECK(pages > 0 && pages <= total, "split_tail: page count out of range");
  KVTRIE_CHECK(node->lock_count == 0, "split_tail of a pinned node");
  if (pages < total) split(node, (total - pages) * page_tokens_);
  return node;
}

std::vector<PageId> PrefixTrie::demote(TrieNode* node, std::span<const PageId> host_pages) {
  KVTRIE_CHECK(fresh_account(node).in_device_lru, "demote of a node that is not device-evictable");
  KVTRIE_CHECK(host_pages.size() == node->device_pages.size(), "demote needs one host page per device page");
  std::vector<PageId> device_pages = std::move(node->device_pages);
  node->device_pages.clear();
  node->host_pages.assign(host_pages.begin(), host_pages.end());
  reaccount(node);
  reaccount(node->parent);
  publish_move(node, Tier::Device, Tier::Host);
  maybe_merge(node);  // with its host-only child; the parent stays device-resident, so never upward
  return device_pages;
}

DroppedPages PrefixTrie::drop(TrieNode* node) {
  KVTRIE_CHECK(!node->is_root(), "drop of a root");
  KVTRIE_CHECK(node->lock_count == 0, "drop of a pinned node");
  DroppedPages dropped;
  std::vector<PageHash> device_hashes, host_hashes;  // what the event sink is told is gone
  std::vector<TrieNode*> stack{node};
  while (!stack.empty()) {
    TrieNode* x = stack.back();
    stack.pop_back();
    KVTRIE_CHECK(x->lock_count == 0, "drop of a subtree holding a pinned node");
    if (sink_ != nullptr) {
      auto& gone = x->on_device() ? device_hashes : host_hashes;
      gone.insert(gone.end(), x->page_hashes.begin(), x->page_hashes.end());
    }
    unaccount(x);
    release_pages(x, dropped);
    --totals_.nodes;
    for (auto& child : x->children) stack.push_back(child.get());
  }
  TrieNode* parent = node->parent;
  auto& siblings = parent->children;
  siblings.erase(
      std::find_if(siblings.begin(), siblings.end(), [&](const auto& c) { return c.get() == node; }));
  reaccount(parent);
  maybe_merge(parent);
  publish_removed(std::move(device_hashes), Tier::Device);
  publish_removed(std::move(host_hashes), Tier::Host);
  return dropped;
}

std::vector<FullPage> PrefixTrie::full_pages(const TrieNode* node) const {
  std::vector<FullPage> pages;
  const bool device = node->on_device();
  for (std::size_t i = 0; i < node->page_hashes.size(); ++i) {
    std::optional<PageHash> parent;
    if (i > 0)
      parent = node->page_hashes[i - 1];
    else if (!node->parent->is_root())
      parent = node->parent->page_hashes.back();
    pages.push_back(
        {node->page_hashes[i],
         parent,
         std::span(node->key).subspan(i * page_tokens_, page_tokens_),
         {device ? node->device_pages[i] : node->host_pages[i], device ? Tier::Device : Tier::Host}});
  }
  return pages;
}

bool PrefixTrie::has_child_page(const Lease& at, std::span<const TokenId> page) const {
  KVTRIE_CHECK(!at.empty() && at.trie_ == this && page.size() == page_tokens_,
               "has_child_page needs a lease of this trie and one page");
  for (const auto& child : at.node_->children)
    if (child->key.size() >= page_tokens_ && std::equal(page.begin(), page.end(), child->key.begin()))
      return true;
  return false;
}

std::vector<PageHash> PrefixTrie::add_host_leaf(const Lease& at, std::span<const TokenId> tokens,
                                                std::span<const PageId> host_pages) {
  KVTRIE_CHECK(!at.empty() && at.trie_ == this, "add_host_leaf needs a lease of this trie");
  TrieNode* parent = at.node_;
  KVTRIE_CHECK(parent->end % page_tokens_ == 0 && parent->key.size() % page_tokens_ == 0,
               "a host leaf hangs from a node of whole pages");
  KVTRIE_CHECK(
      !tokens.empty() && tokens.size() % page_tokens_ == 0 && host_pages.size() == pages_for(tokens.size()),
      "a host leaf holds whole pages, one host page each");
  const auto first_page = tokens.first(page_tokens_);
  for (const auto& child : parent->children)
    KVTRIE_CHECK(child->key.size() < page_tokens_ ||
                     !std::equal(first_page.begin(), first_page.end(), child->key.begin()),
                 "a host leaf over a page the trie holds");
  auto owned = make_node(parent);
  TrieNode* node = owned.get();
  node->key.assign(tokens.begin(), tokens.end());
  node->end = parent->end + static_cast<std::uint32_t>(tokens.size());
  node->host_pages.assign(host_pages.begin(), host_pages.end());
  parent->children.push_back(std::move(owned));
  ++tick_;
  node->last_use = tick_;  // just asked for: the last page the host tier gives up
  reaccount(node);
  reaccount(parent);
  hash_new_pages(node);
  publish_stored(node, 0, Tier::Host);
  return node->page_hashes;
}

}  // namespace kvtrie
