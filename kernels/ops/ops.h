// Contract: the elementwise ops of the forward pass. Each records one (or, for chunked
// tables, a few) dispatches into a CommandRecorder; barriers are the recorder's job. Activations are f32,
// contiguous unless a stride says otherwise; counts are in elements. All views must stay alive until the
// recording has executed. Call from the thread that owns the Context. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "base/tensor_type.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/kv_layout.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// y = x / sqrt(mean(x^2) + eps) * weight (weight optional: empty view). Row r of `rows` starts at
// (r / heads) * stride + (r % heads) * n in x (y_stride in y): heads = 1 and stride = n for plain rows;
// per-head q/k norm: heads = n_heads, n = head_dim, stride = the token stride.
struct RmsNormArgs {
  vk::BufferView x, weight, y;
  uint32_t rows = 0, n = 0;
  float eps = 1e-5f;
  uint32_t heads = 1;
  uint32_t x_stride = 0, y_stride = 0;  // 0: n * heads
  // y as f16 (n and y_stride even), the values convert_f16 would make of the f32 ones: the f16 x of a
  // tensor-core product without a conversion of its own.
  bool half_out = false;
};
void rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a);
// x += residual in place (same layout as x), then y = rms_norm(x) as above: a residual connection and the
// following norm in one dispatch, with the values of add() then rms_norm().
void add_rms_norm(vk::CommandRecorder& rec, const Kernels& k, const RmsNormArgs& a, vk::BufferView residual);

enum class RopeMode : uint32_t { Normal = 0, Neox = 1 };
// In place on x: token t (position positions[t], int32) has n_heads heads of head_dim floats, heads
// contiguous, tokens token_stride floats apart (0: n_heads * head_dim). freq_factors (rope_dims/2 floats)
// optional.
struct RopeArgs {
  vk::BufferView x, positions, freq_factors;
  uint32_t n_tokens = 0, n_heads = 0, head_dim = 0, rope_dims = 0;
  uint32_t token_stride = 0;
  float freq_base = 10000.0f;
  RopeMode mode = RopeMode::Normal;
};
void rope(vk::CommandRecorder& rec, const Kernels& k, const RopeArgs& a);

// out = silu(gate) * up over count values. half_out: out as f16 (count even), the values convert_f16
// would make of the f32 ones.
void swiglu(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate, vk::BufferView up,
            vk::BufferView out, uint32_t count, bool half_out = false);
// out[t][c] = silu(gate_up[t][c]) * gate_up[t][n + c] for tokens x n values: the output of one product of
// the joined [gate; up] matrix (2 n values a token) to SwiGLU's (n a token). half_out as above (n even).
void swiglu_joined(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView gate_up, vk::BufferView out,
                   uint32_t tokens, uint32_t n, bool half_out = false);
// out = f16(x) over count values (even), packed: the f16 copy of x that matmul's CoopMat2 path reads.
void convert_f16(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView out,
                 uint32_t count);
// out = a + b over count values (out may equal a).
void add(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView a, vk::BufferView b, vk::BufferView out,
         uint32_t count);
// x[r * stride + c] += bias[c], c < n, in place (stride 0: n).
// Reads src (a multiple of 16 bytes) once with `threads` invocations (rounded up to whole work groups),
// writing one word per invocation to sink: a read-bandwidth probe for benchmarks.
void read_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads);
// `groups` work groups run `phases` phases of one add a work group, with sync a grid-wide barrier after
// each (sync holds two words, zero before the dispatch; sync[1] counts waits that gave up): the cost of a
// dependent level inside one dispatch, for benchmarks on a GPU only (every group must be resident at once).
void grid_sync_probe(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView sync, vk::BufferView data,
                     uint32_t groups, uint32_t phases, bool with_sync);
void add_bias(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView x, vk::BufferView bias,
              uint32_t rows, uint32_t n, uint32_t stride = 0);

// Embedding lookup: out[t] = dequant(row ids[t]) of a table of `type` with n values per row. The table may
// be given as several chunks of whole rows (a table larger than a binding): call once per chunk with
// row_begin = the chunk's first row and row_count its rows; tokens outside the chunk are left untouched.
struct GetRowsArgs {
  vk::BufferView table;  // any byte offset; rows are row_bytes(type, n) apart
  TensorType type = TensorType::F32;
  uint32_t n = 0;
  uint32_t row_begin = 0, row_count = 0;
  vk::BufferView ids;  // int32 per token
  vk::BufferView out;  // f32, out_stride floats per token (0: n)
  uint32_t n_tokens = 0;
  uint32_t out_stride = 0;
};
void get_rows(vk::CommandRecorder& rec, const Kernels& k, const GetRowsArgs& a);
// The shader variant suffix of a tensor type ("q4_k"), shared with the matrix ops.
const char* type_variant(TensorType type);

// Stores one layer's K and V rows (f32) of a batch into f16 pages at slots[t] (int32, global slot =
// page * P + slot_in_page; negative = skip). `pages` binds pages [page_begin, page_begin + page_count) of
// the pool (call once per chunk when the pool is split).
struct KvWriteArgs {
  vk::BufferView k, v, slots, pages;
  KvLayout layout;
  uint32_t layer = 0;
  uint32_t n_tokens = 0;
  uint32_t k_stride = 0, v_stride = 0;  // floats between tokens (0: kv_dim)
  uint32_t page_begin = 0, page_count = 0;
};
void kv_write(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a);
// kv_write with K rotated on the way by normal-mode rope (rope.mode must be Normal; rope.x, n_tokens and
// n_heads are ignored: K comes from a.k, one token per row); the K buffer is left unrotated. With q_rope
// (the same positions, factors, base and dims), Q (q_rope.x, q_rope.n_heads heads a token) is also rotated
// in place, as rope(q_rope) would; a pool split into chunks passes it with one chunk only.
void kv_write_rope(vk::CommandRecorder& rec, const Kernels& k, const KvWriteArgs& a, const RopeArgs& rope,
                   const RopeArgs* q_rope = nullptr);

}  // namespace kvtrie::kernels
