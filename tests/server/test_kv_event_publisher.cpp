// The KV-event publisher in process (server/kv_event_publisher.h): what a ZMQ subscriber receives (three
// frames, big-endian sequence numbers from 0, the first batch an AllBlocksCleared) decoded with msgpack into
// vLLM's array layout field by field; the replay socket's answer; and a full queue dropping and counting
// events instead of blocking the engine thread.
#include <gtest/gtest.h>

#define MSGPACK_NO_BOOST
#include <msgpack.hpp>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "server/kv_event_encoding.h"
#include "server/kv_event_publisher.h"
#include "tests/server/daemon_process.h"

namespace kvtrie::server {
namespace {

// A loopback TCP port: the publisher binds "tcp://*:N" (a wildcard host), the test connects to loopback.
struct Port {
  int number = test::free_port();
  std::string bind() const { return "tcp://*:" + std::to_string(number); }
  std::string connect() const { return "tcp://127.0.0.1:" + std::to_string(number); }
};

void wait_for_batches(const KvEventPublisher& publisher, std::uint64_t n) {
  while (publisher.published_batches() < n) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

KvEvent stored() {
  KvEvent e;
  e.kind = KvEvent::Kind::Stored;
  e.tier = Tier::Device;
  e.hashes = {0xfedcba9876543210ULL, 7};
  e.parent = 42;
  e.page_tokens = 2;
  e.tokens = {1, 2, 3, 4};
  return e;
}

KvEvent removed() {
  KvEvent e;
  e.kind = KvEvent::Kind::Removed;
  e.tier = Tier::Host;
  e.hashes = {9};
  return e;
}

std::int64_t sequence_of(const zmq::message_t& frame) {
  EXPECT_EQ(frame.size(), 8u);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v = v << 8 | frame.data<std::uint8_t>()[i];
  return static_cast<std::int64_t>(v);
}

// The events of one EventBatch payload, checking the batch's own layout [ts, events, data_parallel_rank].
std::vector<msgpack::object> events_of(const zmq::message_t& payload, msgpack::object_handle& keep) {
  keep = msgpack::unpack(static_cast<const char*>(payload.data()), payload.size());
  const msgpack::object& batch = keep.get();
  EXPECT_EQ(batch.type, msgpack::type::ARRAY);
  EXPECT_EQ(batch.via.array.size, 3u);
  EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64);
  EXPECT_GT(batch.via.array.ptr[0].as<double>(), 1.6e9) << "seconds since the epoch";
  EXPECT_EQ(batch.via.array.ptr[2].as<std::int64_t>(), 0);
  const msgpack::object& events = batch.via.array.ptr[1];
  return {events.via.array.ptr, events.via.array.ptr + events.via.array.size};
}

TEST(KvEventPublisher, SubscribersGetVllmEventBatchesInOrder) {
  const Port port;
  KvEventPublisher publisher({port.bind(), "", "kv@pod@model"});
  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  wait_for_batches(publisher, 1);  // batch 0, the start's AllBlocksCleared, goes before we subscribe
  sub.connect(port.connect());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the subscription reaches the publisher
  publisher.publish(stored());
  publisher.publish(removed());
  publisher.publish(KvEvent{});

  // The three may leave in one batch or several: collect them, checking each batch's frames.
  std::vector<msgpack::object_handle> keep;
  std::vector<msgpack::object> events;
  for (std::int64_t expected_sequence = 1; events.size() < 3; ++expected_sequence) {
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(sub, std::back_inserter(frames)));
    ASSERT_EQ(frames.size(), 3u);
    EXPECT_EQ(frames[0].to_string(), "kv@pod@model");
    EXPECT_EQ(sequence_of(frames[1]), expected_sequence);
    keep.emplace_back();
    const std::vector<msgpack::object> batch = events_of(frames[2], keep.back());
    events.insert(events.end(), batch.begin(), batch.end());
  }
  ASSERT_EQ(events.size(), 3u);
  const auto field = [&](std::size_t event, std::size_t i) { return events[event].via.array.ptr[i]; };
  // BlockStored: tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name.
  ASSERT_EQ(events[0].via.array.size, 8u);
  EXPECT_EQ(field(0, 0).as<std::string>(), "BlockStored");
  EXPECT_EQ(field(0, 1).as<std::vector<std::uint64_t>>(),
            (std::vector<std::uint64_t>{0xfedcba9876543210ULL, 7}));
  EXPECT_EQ(field(0, 2).as<std::uint64_t>(), 42u);
  EXPECT_EQ(field(0, 3).as<std::vector<int>>(), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(field(0, 4).as<int>(), 2);
  EXPECT_TRUE(field(0, 5).is_nil());
  EXPECT_EQ(field(0, 6).as<std::string>(), "GPU");
  EXPECT_TRUE(field(0, 7).is_nil());
  // BlockRemoved: tag, block_hashes, medium.
  ASSERT_EQ(events[1].via.array.size, 3u);
  EXPECT_EQ(field(1, 0).as<std::string>(), "BlockRemoved");
  EXPECT_EQ(field(1, 1).as<std::vector<std::uint64_t>>(), (std::vector<std::uint64_t>{9}));
  EXPECT_EQ(field(1, 2).as<std::string>(), "CPU");
  // AllBlocksCleared: the tag alone.
  ASSERT_EQ(events[2].via.array.size, 1u);
  EXPECT_EQ(field(2, 0).as<std::string>(), "AllBlocksCleared");
  EXPECT_EQ(publisher.dropped_events(), 0u);
}

TEST(KvEventPublisher, MediumNamesTheTiersAsVllmDoesAndTheDiskTierDisk) {
  EXPECT_STREQ(kv_event_medium(Tier::Device), "GPU");
  EXPECT_STREQ(kv_event_medium(Tier::Host), "CPU");
  EXPECT_STREQ(kv_event_medium(Tier::Disk), "DISK");
}

TEST(KvEventPublisher, ReplayAnswersBufferedBatchesFromTheStartSequenceThenMinusOne) {
  const Port pub, replay;
  KvEventPublisherOptions options{pub.bind(), replay.connect(), ""};
  options.replay_batches = 2;  // batch 0 (AllBlocksCleared) falls out of the buffer
  KvEventPublisher publisher(options);
  wait_for_batches(publisher, 1);
  for (std::uint64_t i = 0; i < 2; ++i) {
    publisher.publish(removed());
    wait_for_batches(publisher, i + 2);
  }
  ASSERT_EQ(publisher.published_batches(), 3u);

  zmq::context_t context;
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(replay.connect());
  const std::string start = kv_event_sequence_frame(0);
  std::array<zmq::const_buffer, 2> request{zmq::const_buffer{}, zmq::buffer(start)};
  ASSERT_TRUE(zmq::send_multipart(dealer, request));
  std::vector<std::int64_t> sequences;
  for (;;) {
    std::vector<zmq::message_t> frames;
    ASSERT_TRUE(zmq::recv_multipart(dealer, std::back_inserter(frames)));
    ASSERT_EQ(frames.size(), 3u);  // empty delimiter, sequence, payload
    sequences.push_back(sequence_of(frames[1]));
    if (sequences.back() == -1) {
      EXPECT_EQ(frames[2].size(), 0u);
      break;
    }
    msgpack::object_handle keep;
    EXPECT_EQ(events_of(frames[2], keep).size(), 1u);
  }
  EXPECT_EQ(sequences, (std::vector<std::int64_t>{1, 2, -1}));
}

TEST(KvEventPublisher, AFullQueueDropsAndCountsInsteadOfWaiting) {
  KvEventPublisherOptions options{Port().bind(), "", ""};
  options.max_queued_events = 3;
  options.batch_interval = std::chrono::milliseconds(2000);  // the thread sleeps while we publish
  KvEventPublisher publisher(options);
  wait_for_batches(publisher, 1);
  for (int i = 0; i < 10; ++i) publisher.publish(removed());
  EXPECT_EQ(publisher.dropped_events(), 7u);
}

}  // namespace
}  // namespace kvtrie::server
