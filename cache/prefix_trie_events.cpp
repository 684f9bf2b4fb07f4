// The page hashes of the prefix trie and the events that publish them: what a router learns about the pages
// this cache holds (cache/kv_event_sink.h). Structure changes call these at the moment a full page enters or
// leaves a tier.
#include <string>

#include "base/error.h"
#include "cache/page_hash.h"
#include "cache/prefix_trie.h"

namespace kvtrie {

PageHash PrefixTrie::hash_before(const TrieNode* node) const {
  const TrieNode* parent = node->parent;
  // A node starts on a page boundary and its parent holds only full pages: the chain continues from them.
  return parent->is_root() ? namespace_page_seed(node->ns) : parent->page_hashes.back();
}

std::size_t PrefixTrie::hash_new_pages(TrieNode* node) {
  const std::size_t first = node->page_hashes.size();
  const std::size_t full = node->key.size() / page_tokens_;
  PageHash previous = first == 0 ? hash_before(node) : node->page_hashes.back();
  for (std::size_t i = first; i < full; ++i) {
    previous = chain_page_hash(previous, std::span(node->key).subspan(i * page_tokens_, page_tokens_));
    node->page_hashes.push_back(previous);
  }
  return first;
}

void PrefixTrie::publish_stored(const TrieNode* node, std::size_t first_page, Tier tier) {
  if (sink_ == nullptr || first_page >= node->page_hashes.size()) return;
  KvEvent event;
  event.kind = KvEvent::Kind::Stored;
  event.tier = tier;
  event.page_tokens = page_tokens_;
  event.hashes.assign(node->page_hashes.begin() + static_cast<std::ptrdiff_t>(first_page),
                      node->page_hashes.end());
  if (first_page > 0)
    event.parent = node->page_hashes[first_page - 1];
  else if (!node->parent->is_root())
    event.parent = node->parent->page_hashes.back();
  event.tokens.assign(
      node->key.begin() + static_cast<std::ptrdiff_t>(first_page * page_tokens_),
      node->key.begin() + static_cast<std::ptrdiff_t>(node->page_hashes.size() * page_tokens_));
  sink_->publish(std::move(event));
}

void PrefixTrie::publish_removed(std::vector<PageHash> hashes, Tier tier) {
  if (sink_ == nullptr || hashes.empty()) return;
  KvEvent event;
  event.kind = KvEvent::Kind::Removed;
  event.tier = tier;
  event.hashes = std::move(hashes);
  sink_->publish(std::move(event));
}

void PrefixTrie::publish_move(const TrieNode* node, Tier from, Tier to) {
  if (sink_ == nullptr) return;
  publish_removed(node->page_hashes, from);
  publish_stored(node, 0, to);
}

PageHashListing PrefixTrie::page_hashes() const {
  PageHashListing listing;
  visit_nodes([&](const TrieNode* node) {
    auto& out = node->on_device() ? listing.device : listing.host;
    out.insert(out.end(), node->page_hashes.begin(), node->page_hashes.end());
  });
  return listing;
}

}  // namespace kvtrie
