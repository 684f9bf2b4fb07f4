#include "server/kv_event_encoding.h"

// msgpack-c's C++ headers use Boost only for optional adaptors that kvtrie does not need.
#define MSGPACK_NO_BOOST
#include <msgpack.hpp>
#include <string_view>

namespace kvtrie::server {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& pk, std::string_view s) {
  pk.pack_str(static_cast<std::uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<std::uint32_t>(s.size()));
}

void pack_hashes(Packer& pk, const std::vector<PageHash>& hashes) {
  pk.pack_array(static_cast<std::uint32_t>(hashes.size()));
  for (PageHash h : hashes) pk.pack_uint64(h);
}

void pack_event(Packer& pk, const KvEvent& e) {
  switch (e.kind) {
    case KvEvent::Kind::Stored:
      pk.pack_array(8);
      pack_str(pk, "BlockStored");
      pack_hashes(pk, e.hashes);
      if (e.parent)
        pk.pack_uint64(*e.parent);
      else
        pk.pack_nil();
      pk.pack_array(static_cast<std::uint32_t>(e.tokens.size()));
      for (TokenId t : e.tokens) pk.pack_int32(t);
      pk.pack_uint32(e.page_tokens);
      pk.pack_nil();  // lora_id: kvtrie serves no adapters
      pack_str(pk, kv_event_medium(e.tier));
      pk.pack_nil();  // lora_name
      return;
    case KvEvent::Kind::Removed:
      pk.pack_array(3);
      pack_str(pk, "BlockRemoved");
      pack_hashes(pk, e.hashes);
      pack_str(pk, kv_event_medium(e.tier));
      return;
    case KvEvent::Kind::Cleared:
      pk.pack_array(1);
      pack_str(pk, "AllBlocksCleared");
      return;
  }
}

}  // namespace

const char* kv_event_medium(Tier tier) {
  switch (tier) {
    case Tier::Device:
      return "GPU";
    case Tier::Host:
      return "CPU";
    case Tier::Disk:
      return "DISK";
  }
  return "?";
}

std::string encode_kv_event_batch(double timestamp, std::span<const KvEvent> events,
                                  std::int64_t data_parallel_rank) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_array(3);
  pk.pack_double(timestamp);
  pk.pack_array(static_cast<std::uint32_t>(events.size()));
  for (const KvEvent& e : events) pack_event(pk, e);
  pk.pack_int64(data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

std::string kv_event_sequence_frame(std::int64_t sequence) {
  std::string frame(8, '\0');
  const auto bits = static_cast<std::uint64_t>(sequence);
  for (int i = 0; i < 8; ++i) frame[static_cast<std::size_t>(i)] = static_cast<char>(bits >> (56 - 8 * i));
  return frame;
}

}  // namespace kvtrie::server
