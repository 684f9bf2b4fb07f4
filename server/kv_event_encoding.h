// Contract: vLLM's KV-event wire format (vllm/distributed/kv_events.py), written from the cache's KvEvents
// (cache/kv_event_sink.h) so that the routers that read vLLM's events (llm-d's precise-prefix-cache scorer,
// Dynamo's KV router) read kvtrie's. One ZMQ message is three frames: topic, the batch's sequence number
// (8 bytes, big-endian), and one msgpack EventBatch. Every struct is a msgpack array in field order
// (msgspec's array_like), each event led by its type name (msgspec's tag):
//   EventBatch       [ts: float64 seconds since the epoch, events: [...], data_parallel_rank: int]
//   BlockStored      ["BlockStored", block_hashes: [uint64], parent_block_hash: uint64 | nil,
//                     token_ids: [int], block_size: int, lora_id: nil, medium: str, lora_name: nil]
//   BlockRemoved     ["BlockRemoved", block_hashes: [uint64], medium: str]
//   AllBlocksCleared ["AllBlocksCleared"]
// medium is "GPU" for the device tier and "CPU" for the host tier. vLLM's later optional fields (extra_keys,
// group_idx, ...) default to nil and, as msgspec omits trailing defaults, are left out. Pure functions; any
// thread.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "cache/kv_event_sink.h"

namespace kvtrie::server {

const char* kv_event_medium(Tier tier);

// The msgpack bytes of one EventBatch holding `events`, in order.
std::string encode_kv_event_batch(double timestamp, std::span<const KvEvent> events,
                                  std::int64_t data_parallel_rank = 0);

// The 8-byte big-endian frame of a sequence number (-1 ends a replay).
std::string kv_event_sequence_frame(std::int64_t sequence);

}  // namespace kvtrie::server
