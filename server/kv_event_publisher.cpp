#include "server/kv_event_publisher.h"

#include <spdlog/spdlog.h>

#include <array>
#include <iterator>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/error.h"
#include "server/kv_event_encoding.h"

namespace kvtrie::server {
namespace {

// vLLM's rule for its PUB endpoint: a wildcard host or a local transport is ours to bind; any other address
// is a router that binds and waits for publishers to connect.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct KvEventPublisher::Sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  zmq::socket_t replay{context, zmq::socket_type::router};
  bool has_replay = false;
};

KvEventPublisher::KvEventPublisher(KvEventPublisherOptions options)
    : options_(std::move(options)), sockets_(std::make_unique<Sockets>()) {
  Sockets& s = *sockets_;
  try {
    s.pub.set(zmq::sockopt::sndhwm, 100'000);  // beyond it a slow subscriber loses batches; we never wait
    s.pub.set(zmq::sockopt::linger, 200);      // the last batches may still leave at shutdown
    if (binds(options_.endpoint))
      s.pub.bind(options_.endpoint);
    else
      s.pub.connect(options_.endpoint);
  } catch (const zmq::error_t& e) {
    throw InputError("--kv-events " + options_.endpoint + ": " + e.what());
  }
  if (!options_.replay_endpoint.empty()) {
    try {
      // A replay answers up to replay_batches messages at once: no high-water mark may cut it short (the
      // buffer bounds what one request costs).
      s.replay.set(zmq::sockopt::sndhwm, 0);
      s.replay.set(zmq::sockopt::linger, 0);
      s.replay.bind(options_.replay_endpoint);
      s.has_replay = true;
    } catch (const zmq::error_t& e) {
      throw InputError("--kv-events-replay " + options_.replay_endpoint + ": " + e.what());
    }
  }
  queued_.push_back(KvEvent{});  // AllBlocksCleared: whatever a router knew of this replica is gone
  thread_ = std::thread([this] { run(); });
  spdlog::info("kv events: publishing on {} ({}{}), topic \"{}\"", options_.endpoint,
               binds(options_.endpoint) ? "bound" : "connected",
               s.has_replay ? ", replay on " + options_.replay_endpoint : "", options_.topic);
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::publish(KvEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (queued_.size() < options_.max_queued_events) {
      queued_.push_back(std::move(event));
      return;
    }
  }
  if (dropped_.fetch_add(1, std::memory_order_relaxed) == 0)
    spdlog::warn("kv events: the queue is full ({} events): dropping events (kvtrie_kv_events_dropped_total)",
                 options_.max_queued_events);
}

void KvEventPublisher::run() {
  std::vector<KvEvent> batch;
  for (;;) {
    bool stopping = false;
    {
      std::lock_guard lock(mutex_);
      stopping = stop_;
      batch.swap(queued_);
    }
    if (!batch.empty()) send_batch(batch);
    batch.clear();
    if (stopping) return;
    if (sockets_->has_replay) {
      zmq::pollitem_t item{sockets_->replay.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, options_.batch_interval);
      } catch (const zmq::error_t& e) {
        spdlog::warn("kv events: polling the replay socket failed: {}", e.what());
      }
      if (item.revents & ZMQ_POLLIN) answer_replays();
    } else {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, options_.batch_interval, [this] { return stop_; });
    }
  }
}

void KvEventPublisher::send_batch(std::vector<KvEvent>& events) {
  const std::int64_t sequence = next_sequence_.load(std::memory_order_relaxed);
  std::string payload = encode_kv_event_batch(now_seconds(), events);
  const std::string sequence_frame = kv_event_sequence_frame(sequence);
  try {
    std::array<zmq::const_buffer, 3> frames{zmq::buffer(options_.topic), zmq::buffer(sequence_frame),
                                            zmq::buffer(payload)};
    // PUB never blocks: past the high-water mark a subscriber misses the batch (and may replay it).
    zmq::send_multipart(sockets_->pub, frames, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    spdlog::warn("kv events: sending batch {} failed: {}", sequence, e.what());
  }
  published_events_.fetch_add(events.size(), std::memory_order_relaxed);
  next_sequence_.store(sequence + 1, std::memory_order_relaxed);
  if (options_.replay_batches == 0) return;
  if (replay_.size() == options_.replay_batches) replay_.pop_front();
  replay_.emplace_back(sequence, std::move(payload));
}

void KvEventPublisher::answer_replays() {
  zmq::socket_t& socket = sockets_->replay;
  for (;;) {
    std::vector<zmq::message_t> request;
    try {
      if (!zmq::recv_multipart(socket, std::back_inserter(request), zmq::recv_flags::dontwait)) return;
    } catch (const zmq::error_t& e) {
      spdlog::warn("kv events: reading a replay request failed: {}", e.what());
      return;
    }
    // [client identity, empty delimiter, start sequence]: what a REQ or DEALER client's request becomes.
    if (request.size() != 3 || request[2].size() != 8) {
      spdlog::warn("kv events: ignoring a malformed replay request of {} frames", request.size());
      continue;
    }
    std::uint64_t start = 0;
    for (std::size_t i = 0; i < 8; ++i) start = start << 8 | request[2].data<std::uint8_t>()[i];
    const std::string identity = request[0].to_string();
    auto reply = [&](const std::string& sequence, const std::string& payload) {
      std::array<zmq::const_buffer, 4> frames{zmq::buffer(identity), zmq::const_buffer{},
                                              zmq::buffer(sequence), zmq::buffer(payload)};
      zmq::send_multipart(socket, frames, zmq::send_flags::dontwait);
    };
    try {
      for (const auto& [sequence, payload] : replay_)
        if (static_cast<std::uint64_t>(sequence) >= start) reply(kv_event_sequence_frame(sequence), payload);
      reply(kv_event_sequence_frame(-1), "");
    } catch (const zmq::error_t& e) {
      spdlog::warn("kv events: answering a replay request failed: {}", e.what());
    }
  }
}

}  // namespace kvtrie::server
