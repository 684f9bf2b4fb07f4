// Structure of the prefix trie: matching, pinning, insertion, splits and merges, and the bookkeeping that
// keeps the cached totals and LRU sets exact. Tier moves and eviction primitives are in
// prefix_trie_tiers.cpp, the invariant audit in prefix_trie_check.cpp.
#include "cache/prefix_trie.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace kvtrie {
namespace {

std::size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

struct ChildMatch {
  TrieNode* child = nullptr;
  std::size_t common = 0;
};

// The child sharing the most leading tokens with rest; on a tie, one whose whole key matched (a partial
// leaf), because it can be extended in place instead of growing a sibling.
ChildMatch best_child(const TrieNode& node, std::span<const TokenId> rest) {
  ChildMatch best;
  bool best_full = false;
  for (const auto& child : node.children) {
    const std::size_t common = common_prefix(child->key, rest);
    if (common == 0) continue;
    const bool full = common == child->key.size();
    if (common > best.common || (common == best.common && full && !best_full)) {
      best = {child.get(), common};
      best_full = full;
    }
  }
  return best;
}

}  // namespace

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    reset();
    trie_ = other.trie_;
    node_ = other.node_;
    spelled_ = other.spelled_;
    other.node_ = nullptr;
  }
  return *this;
}

void Lease::reset() noexcept {
  if (node_ == nullptr) return;
  trie_->unlock_path(node_);
  --trie_->leases_;
  node_ = nullptr;
}

std::uint32_t Lease::tokens() const {
  return node_ == nullptr ? 0 : node_->end;
}

PrefixTrie::PrefixTrie(PagePool& device, PagePool& host, std::uint32_t page_tokens)
    : device_(device), host_(host), page_tokens_(page_tokens) {
  KVTRIE_CHECK(page_tokens > 0, "a page holds at least one token");
  KVTRIE_CHECK(device.tier() == Tier::Device && host.tier() == Tier::Host, "pools passed in the wrong order");
}

PrefixTrie::~PrefixTrie() {
  if (leases_ != 0) {
    // A Lease outliving its trie would unpin freed nodes: a bug in the owner's member order.
    std::fprintf(stderr, "kvtrie: PrefixTrie destroyed with %llu outstanding leases\n",
                 static_cast<unsigned long long>(leases_));
    std::abort();
  }
  DroppedPages ignored;
  for (auto& [ns, root] : roots_) {
    std::vector<TrieNode*> stack{root.get()};
    while (!stack.empty()) {
      TrieNode* node = stack.back();
      stack.pop_back();
      release_pages(node, ignored);
      for (auto& child : node->children) stack.push_back(child.get());
    }
  }
}

std::uint32_t PrefixTrie::pages_for(std::size_t tokens) const {
  return static_cast<std::uint32_t>((tokens + page_tokens_ - 1) / page_tokens_);
}

std::uint32_t PrefixTrie::node_pages(const TrieNode* node) const {
  return pages_for(node->key.size());
}

TrieNode* PrefixTrie::root(NamespaceId ns, GroupId group) {
  auto& slot = roots_[ns];
  if (slot) {
    KVTRIE_CHECK(group == 0 || slot->group == group, "a namespace pinned for another group");
  } else {
    slot = std::make_unique<TrieNode>();
    slot->ns = ns;
    slot->group = group;
    slot->serial = next_serial_++;
    slot->lock_count = 1;  // the permanent lock: a root is never evicted or merged
  }
  return slot.get();
}

const TrieNode* PrefixTrie::find_root(NamespaceId ns) const {
  auto it = roots_.find(ns);
  return it == roots_.end() ? nullptr : it->second.get();
}

MatchResult PrefixTrie::match(NamespaceId ns, std::span<const TokenId> tokens) const {
  MatchResult result;
  const TrieNode* node = find_root(ns);
  if (node == nullptr) return result;
  const TrieNode* last = node;
  std::size_t pos = 0;
  while (pos < tokens.size()) {
    const ChildMatch m = best_child(*node, tokens.subspan(pos));
    if (m.child == nullptr) break;
    const TrieNode* child = m.child;
    const bool device = child->on_device();
    const auto& pages = device ? child->device_pages : child->host_pages;
    for (std::uint32_t i = 0; i < pages_for(m.common); ++i)
      result.pages.push_back({pages[i], device ? Tier::Device : Tier::Host});
    (device ? result.device_tokens : result.host_tokens) += static_cast<std::uint32_t>(m.common);
    if (device && child->lock_count == 0) result.unpinned_device_pages += pages_for(m.common);
    pos += m.common;
    last = child;
    if (m.common < child->key.size() || child->key.size() % page_tokens_ != 0) break;
    node = child;
  }
  result.matched_tokens = static_cast<std::uint32_t>(pos);
  result.tail_tokens = result.matched_tokens % page_tokens_;
  // The handle is for pin()/eviction calls on the non-const trie; match itself changed nothing.
  result.last_node = const_cast<TrieNode*>(last);
  return result;
}

Lease PrefixTrie::pin(NamespaceId ns, std::span<const TokenId> tokens, std::uint32_t n, GroupId group) {
  KVTRIE_CHECK(n <= tokens.size(), "pin beyond the given tokens");
  TrieNode* node = root(ns, group);
  std::size_t pos = 0;
  while (pos < n) {
    const auto rest = tokens.subspan(pos, n - pos);
    const ChildMatch m = best_child(*node, rest);
    KVTRIE_CHECK(m.child != nullptr && (m.common == rest.size() || m.common == m.child->key.size()),
                 "pin of tokens that are not cached");
    TrieNode* child = m.child;
    if (m.common < child->key.size()) {
      // Ends inside child: split at the next page boundary so the pin holds no page it does not need.
      const std::size_t boundary = (m.common + page_tokens_ - 1) / page_tokens_ * page_tokens_;
      if (boundary < child->key.size()) child = split(child, static_cast<std::uint32_t>(boundary));
    }
    pos += std::min(m.common, child->key.size());
    node = child;
  }
  touch_path(node);
  lock_path(node);
  ++leases_;
  return Lease(this, node, n);
}

Lease PrefixTrie::insert(NamespaceId ns, std::span<const TokenId> tokens, std::span<const PageId> pages,
                         const Lease* from) {
  KVTRIE_CHECK(pages.size() == pages_for(tokens.size()), "insert needs one page per started page of tokens");
  const std::size_t n = tokens.size();
  TrieNode* node = root(ns);
  if (from != nullptr && !from->empty()) {
    // The leased path's first spelled_ tokens are the caller's and stay put while pinned (splits only add
    // nodes inside it, merges never touch pinned nodes). Past them, the leased node may have grown with
    // another caller's tokens and been split, leaving heads of those tokens as its ancestors: start at
    // the deepest proper ancestor that ends within the spelled tokens (the leased node itself may be a
    // partial leaf, which the walk extends from its parent).
    KVTRIE_CHECK(from->trie_ == this && from->node_->ns == ns, "insert hint from another trie or namespace");
    KVTRIE_CHECK(from->spelled_ <= n, "insert hint beyond the tokens");
    node = from->node_->is_root() ? from->node_ : from->node_->parent;
    while (!node->is_root() && node->end > from->spelled_) node = node->parent;
  }
  std::size_t pos = node->end;
  while (pos < n) {
    const ChildMatch m = best_child(*node, tokens.subspan(pos));
    const std::size_t rest = n - pos;
    if (m.child == nullptr) {
      node = add_leaf(node, tokens.subspan(pos), pages.subspan(pos / page_tokens_));
      break;
    }
    TrieNode* child = m.child;
    const std::size_t key_size = child->key.size();
    // Tokens of child usable as they are: the whole key, or the full pages before the divergence.
    const std::size_t covered = m.common == key_size ? key_size : m.common / page_tokens_ * page_tokens_;
    if (covered == 0) {
      if (m.common == rest) break;  // the tokens end inside child's first page: all already cached
      node = add_leaf(node, tokens.subspan(pos), pages.subspan(pos / page_tokens_));
      break;
    }
    if (covered < key_size) child = split(child, static_cast<std::uint32_t>(covered));
    if (!child->on_device()) {
      // The caller recomputed a host-only node (its promotion was impossible): keep the device copy so
      // that the new tokens below it can hang from a device-resident parent.
      const std::size_t first = pos / page_tokens_;
      for (std::size_t i = 0; i < pages_for(covered); ++i) {
        device_.retain(pages[first + i]);
        child->device_pages.push_back(pages[first + i]);
      }
      for (PageId page : child->host_pages) host_.release(page);
      child->host_pages.clear();
      reaccount(child);
      reaccount(child->parent);
      publish_move(child, Tier::Host, Tier::Device);
    }
    pos += covered;
    node = child;
    if (covered % page_tokens_ != 0 && pos < n) {
      // child is a partial leaf the tokens extend. Mid-promotion its last page is being written: stop.
      if (child->in_transfer()) break;
      const std::size_t last = (pos - 1) / page_tokens_;  // the partial page, as a page-table index
      if (child->device_pages.back() != pages[last]) {
        device_.retain(pages[last]);
        device_.release(child->device_pages.back());
        child->device_pages.back() = pages[last];
      }
      for (std::size_t i = last + 1; i < pages.size(); ++i) {
        device_.retain(pages[i]);
        child->device_pages.push_back(pages[i]);
      }
      child->key.insert(child->key.end(), tokens.begin() + static_cast<std::ptrdiff_t>(pos), tokens.end());
      child->end = static_cast<std::uint32_t>(n);
      reaccount(child);
      publish_stored(child, hash_new_pages(child), Tier::Device);
      break;
    }
  }
  touch_path(node);
  lock_path(node);
  ++leases_;
  return Lease(this, node, node->end);
}

std::unique_ptr<TrieNode> PrefixTrie::make_node(TrieNode* parent) {
  auto node = std::make_unique<TrieNode>();
  node->ns = parent->ns;
  node->group = parent->group;
  node->parent = parent;
  node->serial = next_serial_++;
  node->last_use = parent->last_use;
  ++totals_.nodes;
  return node;
}

TrieNode* PrefixTrie::add_leaf(TrieNode* parent, std::span<const TokenId> key,
                               std::span<const PageId> pages) {
  KVTRIE_CHECK(parent->is_root() || parent->on_device(),
               "a device page must hang from a device-resident node");
  KVTRIE_CHECK(parent->key.size() % page_tokens_ == 0, "a partial leaf cannot have children");
  auto owned = make_node(parent);
  TrieNode* node = owned.get();
  node->key.assign(key.begin(), key.end());
  node->end = parent->end + static_cast<std::uint32_t>(key.size());
  for (std::uint32_t i = 0; i < pages_for(key.size()); ++i) {
    device_.retain(pages[i]);
    node->device_pages.push_back(pages[i]);
  }
  parent->children.push_back(std::move(owned));
  reaccount(node);
  reaccount(parent);
  hash_new_pages(node);
  publish_stored(node, 0, Tier::Device);
  return node;
}

TrieNode* PrefixTrie::split(TrieNode* node, std::uint32_t at) {
  KVTRIE_CHECK(at > 0 && at < node->key.size() && at % page_tokens_ == 0, "split off a page boundary");
  TrieNode* parent = node->parent;
  auto owned = make_node(parent);
  TrieNode* prefix = owned.get();
  // Every lease through node also passes through its new parent: the prefix inherits the lock count.
  prefix->lock_count = node->lock_count;
  prefix->last_use = node->last_use;
  prefix->key.assign(node->key.begin(), node->key.begin() + at);
  prefix->end = node->start() + at;
  node->key.erase(node->key.begin(), node->key.begin() + at);
  const std::uint32_t head_pages = at / page_tokens_;
  for (auto* list : {&node->device_pages, &node->host_pages}) {
    if (list->empty()) continue;
    auto& dst = list == &node->device_pages ? prefix->device_pages : prefix->host_pages;
    dst.assign(list->begin(), list->begin() + head_pages);
    list->erase(list->begin(), list->begin() + head_pages);
  }
  prefix->page_hashes.assign(node->page_hashes.begin(), node->page_hashes.begin() + head_pages);
  node->page_hashes.erase(node->page_hashes.begin(), node->page_hashes.begin() + head_pages);
  for (auto& slot : parent->children) {
    if (slot.get() != node) continue;
    owned->children.push_back(std::move(slot));
    slot = std::move(owned);
    break;
  }
  KVTRIE_CHECK(!owned, "split: node missing from its parent's children");
  node->parent = prefix;
  reaccount(node);
  reaccount(prefix);
  return prefix;
}

void PrefixTrie::maybe_merge(TrieNode* node) {
  if (node->is_root() || node->children.size() != 1 || node->lock_count != 0) return;
  TrieNode* child = node->children.front().get();
  if (child->lock_count != 0 || node->in_transfer() || child->in_transfer()) return;
  if (node->on_device() != child->on_device()) return;  // a tier boundary stays a node boundary
  unaccount(child);
  node->key.insert(node->key.end(), child->key.begin(), child->key.end());
  node->end = child->end;
  node->device_pages.insert(node->device_pages.end(), child->device_pages.begin(), child->device_pages.end());
  node->host_pages.insert(node->host_pages.end(), child->host_pages.begin(), child->host_pages.end());
  node->page_hashes.insert(node->page_hashes.end(), child->page_hashes.begin(), child->page_hashes.end());
  node->last_use = std::max(node->last_use, child->last_use);
  std::unique_ptr<TrieNode> dying = std::move(node->children.front());
  node->children = std::move(dying->children);
  for (auto& grandchild : node->children) grandchild->parent = node;
  --totals_.nodes;
  reaccount(node);
}

void PrefixTrie::release_pages(TrieNode* node, DroppedPages& dropped) {
  for (PageId page : node->device_pages) device_.release(page);
  for (PageId page : node->host_pages) host_.release(page);
  dropped.device += static_cast<std::uint32_t>(node->device_pages.size());
  dropped.host += static_cast<std::uint32_t>(node->host_pages.size());
  node->device_pages.clear();
  node->host_pages.clear();
}

void PrefixTrie::lock_path(TrieNode* node) {
  for (TrieNode* x = node; x != nullptr; x = x->parent) {
    ++x->lock_count;
    reaccount(x);
  }
}

void PrefixTrie::unlock_path(TrieNode* node) noexcept {
  for (TrieNode* x = node; x != nullptr; x = x->parent) {
    --x->lock_count;
    reaccount(x);
  }
  // Nodes split apart while pinned (a divergence, a tight pin) join again once nobody pins them.
  for (TrieNode* x = node; x != nullptr && !x->is_root();) {
    TrieNode* parent = x->parent;
    maybe_merge(x);
    x = parent;
  }
}

void PrefixTrie::touch_path(TrieNode* node) {
  ++tick_;
  for (TrieNode* x = node; x != nullptr; x = x->parent) {
    x->last_use = tick_;
    reaccount(x);
  }
}

NodeAccount PrefixTrie::fresh_account(const TrieNode* node) const {
  NodeAccount a;
  if (node->is_root()) return a;
  a.device_pages = static_cast<std::uint32_t>(node->device_pages.size());
  a.host_pages = static_cast<std::uint32_t>(node->host_pages.size());
  const bool unlocked = node->lock_count == 0;
  const bool device_only = node->on_device() && !node->on_host();
  const bool host_only = node->on_host() && !node->on_device();
  const bool device_child = std::any_of(node->children.begin(), node->children.end(),
                                        [](const auto& child) { return child->on_device(); });
  if (unlocked && device_only && !device_child) {
    a.device_evictable = a.device_pages;
    a.in_device_lru = true;
  }
  if (unlocked && host_only && node->children.empty()) {
    a.host_evictable = a.host_pages;
    a.in_host_lru = true;
  }
  if (!unlocked) a.device_protected = a.device_pages;
  if (unlocked && host_only) a.host_droppable = a.host_pages;
  if (a.in_device_lru || a.in_host_lru) a.lru_tick = node->last_use;
  return a;
}

void PrefixTrie::unaccount(TrieNode* node) {
  NodeAccount& a = node->account;
  totals_.device_pages -= a.device_pages;
  totals_.host_pages -= a.host_pages;
  totals_.device_evictable -= a.device_evictable;
  totals_.host_evictable -= a.host_evictable;
  totals_.device_protected -= a.device_protected;
  totals_.host_droppable -= a.host_droppable;
  if (a.in_device_lru) device_lru_.erase({a.lru_tick, node->serial, node});
  if (a.in_host_lru) host_lru_.erase({a.lru_tick, node->serial, node});
  if (node->group != 0 && (a.device_pages != 0 || a.in_device_lru)) {
    GroupTotals& g = groups_[node->group];
    g.device_pages -= a.device_pages;
    if (a.in_device_lru) g.device_lru.erase({a.lru_tick, node->serial, node});
  }
  a = NodeAccount{};
}

void PrefixTrie::reaccount(TrieNode* node) {
  unaccount(node);
  const NodeAccount a = fresh_account(node);
  totals_.device_pages += a.device_pages;
  totals_.host_pages += a.host_pages;
  totals_.device_evictable += a.device_evictable;
  totals_.host_evictable += a.host_evictable;
  totals_.device_protected += a.device_protected;
  totals_.host_droppable += a.host_droppable;
  if (a.in_device_lru) device_lru_.insert({a.lru_tick, node->serial, node});
  if (a.in_host_lru) host_lru_.insert({a.lru_tick, node->serial, node});
  if (node->group != 0 && (a.device_pages != 0 || a.in_device_lru)) {
    GroupTotals& g = groups_[node->group];
    g.device_pages += a.device_pages;
    if (a.in_device_lru) g.device_lru.insert({a.lru_tick, node->serial, node});
  }
  node->account = a;
}

}  // namespace kvtrie
