// Contract: paged causal attention with grouped-query heads, for a batch of query tokens that may belong to
// several sequences. Query token t reads its sequence's KV pages through the page table starting at
// page_table[token_info[t].x] and attends to positions 0 .. token_info[t].y (its own position; its K/V must
// already be written). KV pages follow kernels/ops/kv_layout.h: page p, layer l holds K [page_tokens][kv_dim]
// then V [page_tokens][kv_dim] in f16, kv_dim = n_kv_heads * head_dim, the layers of a page contiguous.
// Two passes: attention_paged splits each token's context into chunks of `split_size` positions and runs
// one work group per (chunk, KV head, run of tokens): all query heads of that KV head, and the consecutive
// batch tokens of one sequence inside an aligned block (min(16, 2048 / head_dim) rows = heads x tokens),
// share K/V tiles staged in shared memory, with an online softmax per row; each row writes a partial
// (max, sum, acc) to scratch, and attention_combine merges them in chunk order. Tokens may come in any
// order and mix sequences (a block is cut at each change of page-table offset); each token keeps its own
// causal limit.
// Determinism: the split size and the key tile are fixed (the tile by head_dim), and a row's arithmetic never
// depends on the other rows of its work group, so a token's output is bit-identical whatever batch it runs
// in, alone, inside a prefill block or beside other sequences (K/V must hold finite values). So is the
// decode pass's with split_size 0 (each token's splits its own, by its position), for any batch.
// Tensor cores (args.tensor_cores, where attention_uses_tensor_cores): the split pass of a prefill block runs
// attention_coopmat instead, the same grid and partials with both products on VK_KHR_cooperative_matrix (q
// and the probabilities rounded to f16; 64 or 128 rows = heads x tokens a work group); when the context is
// one split and there is no quantized output it writes the normalised output itself and no combine pass
// runs. Faster for long prompts, and not batch-invariant: a caller under --deterministic leaves it off.
// Decode steps (args.decode, where attention_uses_decode_pass): the split pass is attention_decode instead, a
// work group per (split, KV head, token) whose subgroups walk the keys in blocks of their own (no K/V
// staging; subgroup reductions), and which writes the output itself when the context is one
// split, or, given split_counters, when it is the last of the token's splits to finish. Faster for tokens
// that are each alone in their sequence; another summation order than attention.comp, so a model run takes
// one of the two for all its batches where it needs them batch-invariant (--deterministic). Records into a
// CommandRecorder (owner thread only); every view must outlive the recording's execution.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "kernels/ops/kernels.h"
#include "kernels/ops/kv_layout.h"
#include "kernels/ops/quantized_x.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

struct AttentionArgs {
  vk::BufferView q;         // f32 [tokens][n_heads * head_dim], token stride q_stride floats
  vk::BufferView kv_pages;  // the page pool (f16), or its first pages_per_binding pages
  // A pool larger than one binding (maxStorageBufferRange): bindings 2..4 hold the next pages_per_binding
  // pages each (page p lives in binding p / pages_per_binding). Empty views when unused.
  std::array<vk::BufferView, 3> kv_pages_more{};
  uint32_t pages_per_binding = 0;  // 0: the whole pool is in kv_pages
  vk::BufferView page_table;       // uint32 page ids
  vk::BufferView token_info;       // uint32 pairs per token: (offset of its sequence in page_table, position)
  vk::BufferView scratch;          // at least attention_scratch_bytes(...) bytes
  vk::BufferView out;              // f32 [tokens][n_heads * head_dim], token stride out_stride floats
  uint32_t tokens = 0;
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;  // divides n_heads
  uint32_t head_dim = 0;    // even, at most 256 (multiples of 8 read K/V 16 bytes at a time)
  KvLayout layout;          // page_tokens, n_layers; kv_dim must equal n_kv_heads * head_dim
  uint32_t layer = 0;
  uint32_t max_position = 0;  // >= every token's position: sizes the grid (WGs past a token's end exit)
  // Positions per split; keep it fixed for a model run (determinism). 0 (the decode pass only, with
  // split_counters): each token's own, attention_position_split(its position).
  uint32_t split_size = 256;
  uint32_t q_stride = 0;      // 0: n_heads * head_dim
  uint32_t out_stride = 0;    // 0: n_heads * head_dim
  float scale = 0;            // 0: 1 / sqrt(head_dim)
  bool tensor_cores = false;  // attention_coopmat where attention_uses_tensor_cores (see the contract)
  bool decode = false;        // attention_decode where attention_uses_decode_pass (see the contract)
  // The decode pass's lanes a key (its KEY_LANES): 1, or 2 and 4 (head_dim a multiple of 16 and 32, at most
  // the subgroup size), each lane scoring that part of a key. 0: attention_decode_key_lanes(split_size).
  uint32_t decode_key_lanes = 0;
  // With the decode pass and several splits: a uint32 per (token, KV head, head group of 4 query heads),
  // zero before the call and left zero after it; the last split of each to finish merges them all and writes
  // the output, and no combine pass runs. Empty: the combine pass merges them.
  vk::BufferView split_counters;
  // Set: out is also written quantized for matvec_q8 (head_dim a multiple of 16), as quantize_q8 would
  // write it, in the pass that writes out (no dispatch of its own).
  std::optional<QuantizedX> quantized_out;
  // out as f16 instead (out_stride and head_dim even), the values convert_f16 would make of the f32 ones:
  // the f16 x of a tensor-core o product. Not with quantized_out.
  bool half_out = false;
};

// The work-group size of both attention passes on a device (256 threads; no subgroup operations).
uint32_t attention_workgroup_size(const vk::Device& device);

// Scratch bytes attention needs for these tokens, heads, head_dim, max_position and split_size.
uint64_t attention_scratch_bytes(const AttentionArgs& args);

// The split size of a token at this position under split_size 0: an 8th of its positions as a power of two,
// 128 to 512 (what the engine's rule gives a decode step of one sequence).
uint32_t attention_position_split(uint32_t position);

// The most splits of any token up to max_position: of split_size positions, or under split_size 0 the most
// of any position's own (attention_position_split).
uint32_t attention_max_splits(uint32_t max_position, uint32_t split_size);
// The decode pass's lanes a key under decode_key_lanes 0: 2 where a split of split_size positions has fewer
// keys than the work group has lanes (8 subgroups) and head_dim is a multiple of 16, so that every lane
// scores; else 1 (split_size 0 too: each token's own splits, whatever the batch).
uint32_t attention_decode_key_lanes(const vk::Device& device, uint32_t split_size, uint32_t head_dim);

// Whether attention() runs this call on tensor cores: args.tensor_cores, a device with matmul's CoopMat path
// through VK_KHR_cooperative_matrix, head_dim 64 or 128, and q rows of whole 16-byte groups.
bool attention_uses_tensor_cores(const vk::Device& device, const AttentionArgs& args);

// Whether attention() runs this call's split pass as attention_decode: args.decode and not tensor cores, a
// device with subgroup arithmetic and votes on subgroups of 4 to 32 lanes, head_dim a multiple of 8 and at
// most 32 x the subgroup size.
bool attention_uses_decode_pass(const vk::Device& device, const AttentionArgs& args);

void attention(vk::CommandRecorder& rec, const Kernels& k, const AttentionArgs& args);
// The same with the split pass through `split_pass`, a build of attention.comp, or of attention_decode.comp
// where attention_uses_decode_pass (the tuning harness's probes).
void attention(vk::CommandRecorder& rec, const Kernels& k, const AttentionArgs& args,
               const vk::ComputePipeline& split_pass);

}  // namespace kvtrie::kernels
