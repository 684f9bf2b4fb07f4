// Test support: a KvEventSink that rebuilds, from the events alone, the set of (page hash, tier) a router
// would believe the cache holds, and records every event that breaks the contract of cache/kv_event_sink.h
// (a page stored twice on a tier, a removal of a page not held, a Stored whose parent is unknown, whose
// tokens do not fill its pages, or whose hashes do not chain over its tokens). matches() compares the
// rebuilt set with what the cache lists (device and host; the disk tier's pages are held(Tier::Disk)).
// Single-threaded, like the cache that calls it.
#pragma once
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "cache/kv_event_sink.h"
#include "cache/page_hash.h"
#include "cache/prefix_trie.h"

namespace kvtrie::test {

class KvEventIndex final : public KvEventSink {
 public:
  void publish(KvEvent event) override {
    ++events_[static_cast<int>(event.kind)];
    std::set<PageHash>& held = held_[static_cast<int>(event.tier)];
    switch (event.kind) {
      case KvEvent::Kind::Stored: {
        if (event.tokens.size() != event.hashes.size() * event.page_tokens)
          errors_.push_back("a Stored event's tokens do not fill its pages");
        if (event.parent && !holds(*event.parent))
          errors_.push_back("a Stored event names an unknown parent");
        for (std::size_t i = 0; i < event.hashes.size(); ++i) {
          const std::span<const TokenId> page(event.tokens.data() + i * event.page_tokens, event.page_tokens);
          if ((i > 0 || event.parent) && page.size() == event.page_tokens &&
              chain_page_hash(i > 0 ? event.hashes[i - 1] : *event.parent, page) != event.hashes[i])
            errors_.push_back("a Stored hash is not chained over its tokens");
          if (!held.insert(event.hashes[i]).second) errors_.push_back("a page stored twice on one tier");
        }
        break;
      }
      case KvEvent::Kind::Removed:
        for (PageHash h : event.hashes)
          if (held.erase(h) == 0) errors_.push_back("a removal of a page not held");
        break;
      case KvEvent::Kind::Cleared:
        for (auto& tier : held_) tier.clear();
        break;
    }
  }

  bool holds(PageHash h) const { return held_[0].count(h) + held_[1].count(h) + held_[2].count(h) > 0; }
  const std::set<PageHash>& held(Tier tier) const { return held_[static_cast<int>(tier)]; }
  std::size_t events(KvEvent::Kind kind) const { return events_[static_cast<int>(kind)]; }
  const std::vector<std::string>& errors() const { return errors_; }

  // "" when the rebuilt index equals the listing (which must hold no page twice on a tier), else why not.
  std::string differs_from(const PageHashListing& listing) const {
    for (Tier tier : {Tier::Device, Tier::Host}) {
      const std::vector<PageHash>& listed = tier == Tier::Device ? listing.device : listing.host;
      const std::set<PageHash> unique(listed.begin(), listed.end());
      if (unique.size() != listed.size()) return "the cache lists a page twice on one tier";
      if (unique != held(tier))
        return std::string(tier_name(tier)) + ": the events give " + std::to_string(held(tier).size()) +
               " pages, the cache lists " + std::to_string(unique.size());
    }
    return "";
  }

 private:
  std::set<PageHash> held_[3];  // by Tier
  std::size_t events_[3] = {0, 0, 0};
  std::vector<std::string> errors_;
};

}  // namespace kvtrie::test
