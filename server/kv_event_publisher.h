// Contract: KvEventPublisher sends the cache's KV events to prefix-aware routers as vLLM does (--kv-events):
// a ZMQ PUB socket carrying one EventBatch (server/kv_event_encoding.h) every few milliseconds while events
// come, sequence numbers from 0, the first batch an AllBlocksCleared (a restarted replica forgets what a
// router knew of its previous life); and, with a replay endpoint, a ROUTER socket that answers a request
// [8-byte big-endian start sequence] with every buffered batch from that sequence on, each as
// [sequence, payload], then [-1, ""] (vLLM's replay protocol; the last replay_batches batches are kept).
// The PUB endpoint is bound when it holds '*' or '::' (or is ipc:// or inproc://) and connected to
// otherwise, as vLLM decides; the replay endpoint is always bound.
//
// Threads: publish() is the engine thread's, called by the cache; it only appends to a bounded queue under a
// mutex held for an append or a swap, never waits for the network, and when max_queued_events are already
// waiting it drops the event and counts it (dropped_events(), in /metrics). One publisher thread owns both
// sockets: it encodes, sends and answers replays. The counters are safe from any thread. The destructor
// sends what is queued, then stops the thread. The cache it is attached to must be destroyed first.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cache/kv_event_sink.h"

namespace kvtrie::server {

struct KvEventPublisherOptions {
  std::string endpoint;         // PUB, e.g. tcp://*:5557 (bind) or tcp://router:5557 (connect)
  std::string replay_endpoint;  // ROUTER, e.g. tcp://*:5558; "" for none
  std::string topic;            // first frame of every message (llm-d expects kv@<pod>@<model>)
  std::size_t max_queued_events = 100'000;
  std::size_t replay_batches = 10'000;
  std::chrono::milliseconds batch_interval{10};
};

class KvEventPublisher final : public KvEventSink {
 public:
  // Opens the sockets; throws kvtrie::InputError naming the endpoint when one cannot be bound or parsed.
  explicit KvEventPublisher(KvEventPublisherOptions options);
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void publish(KvEvent event) override;

  std::uint64_t dropped_events() const { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t published_events() const { return published_events_.load(std::memory_order_relaxed); }
  std::uint64_t published_batches() const {
    return static_cast<std::uint64_t>(next_sequence_.load(std::memory_order_relaxed));
  }

 private:
  struct Sockets;
  void run();
  void send_batch(std::vector<KvEvent>& events);
  void answer_replays();

  KvEventPublisherOptions options_;
  std::unique_ptr<Sockets> sockets_;  // the publisher thread's alone once it runs
  std::mutex mutex_;                  // guards queued_ and stop_
  std::condition_variable wake_;      // the destructor's, when no replay socket keeps the thread polling
  std::vector<KvEvent> queued_;
  std::deque<std::pair<std::int64_t, std::string>> replay_;  // publisher thread only
  std::atomic<std::uint64_t> dropped_{0}, published_events_{0};
  std::atomic<std::int64_t> next_sequence_{0};
  bool stop_ = false;
  std::thread thread_;  // last: started when everything above exists
};

}  // namespace kvtrie::server
