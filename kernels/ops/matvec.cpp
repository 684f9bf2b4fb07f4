#include "kernels/ops/matvec.h"

#include <algorithm>
#include <numeric>

#include "kernels/error.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/context.h"

namespace kvtrie::ops {

namespace {
constexpr uint32_t kMaxCols = 8;            // tokens per work group, MAX_COLS in matvec.comp
constexpr uint32_t kMaxGroupsX = 65535;     // the guaranteed minimum of maxComputeWorkGroupCount
}  // namespace

std::string type_variant_suffix(TensorType type) {
  std::string name(tensor_type_info(type).name);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); });
  return name;
}

uint32_t matvec_workgroup_size(const vk::Context& context) {
  // Four subgroups (at least 32 threads, at most 256) balances the subgroup reduction against the
  // per-row parallelism; matvec.comp's shared reduction holds up to 64 subgroups.
  const uint32_t sg = std::max<uint32_t>(context.device().subgroup_size(), 1);
  return std::clamp<uint32_t>(4 * sg, 32, 256);
}

std::vector<RowChunk> split_rows(const WeightMatrix& w, uint64_t max_range, uint64_t alignment) {
  const uint64_t rb = row_bytes(w.type, w.cols);
  KVTRIE_CHECK(rb > 0 && rb <= max_range, "a weight row does not fit one shader binding");
  uint64_t per_chunk = std::min<uint64_t>(max_range / rb, w.rows);
  if (per_chunk < w.rows) {
    // Chunk starts must be aligned: make rows-per-chunk a multiple of alignment / gcd(rb, alignment).
    const uint64_t step = alignment / std::gcd(rb, alignment);
    per_chunk -= per_chunk % step;
    KVTRIE_CHECK(per_chunk > 0, "weight rows cannot be split at the device's offset alignment");
  }
  std::vector<RowChunk> chunks;
  for (uint64_t r = 0; r < w.rows; r += per_chunk)
    chunks.push_back({static_cast<uint32_t>(r), static_cast<uint32_t>(std::min<uint64_t>(per_chunk, w.rows - r))});
  if (chunks.empty()) chunks.push_back({0, 0});
  return chunks;
}

void matvec(vk::CommandRecorder& recorder, const MatmulArgs& args) {
  const WeightMatrix& w = args.w;
  const TensorTypeInfo& info = tensor_type_info(w.type);
  KVTRIE_CHECK(w.cols % info.block_elements == 0, "matvec: row length is not whole blocks");
  if (w.rows == 0 || args.tokens == 0) return;
  vk::Context& ctx = recorder.context();
  const auto& dev = ctx.device().info();
  const uint32_t wg = matvec_workgroup_size(ctx);
  const vk::ComputePipeline& pipeline = ctx.pipelines().get("matvec_" + type_variant_suffix(w.type), {wg});
  const uint64_t rb = row_bytes(w.type, w.cols);
  const uint32_t x_stride = args.x_stride ? args.x_stride : w.cols;
  const uint32_t y_stride = args.y_stride ? args.y_stride : w.rows;
  KVTRIE_CHECK(w.data.range >= rb * w.rows, "matvec: weight view is smaller than the matrix");
  for (const RowChunk& chunk : split_rows(w, dev.max_storage_buffer_range, dev.min_storage_buffer_offset_alignment)) {
    const MatmulPush push{chunk.rows, w.cols, args.tokens, static_cast<uint32_t>(rb), x_stride, y_stride,
                          chunk.first_row};
    // Rows beyond 65535 work groups wrap into y (the shader flattens x and y).
    const uint32_t gx = std::min(chunk.rows, kMaxGroupsX);
    const uint32_t gy = (chunk.rows + gx - 1) / gx;
    const uint32_t gz = (args.tokens + kMaxCols - 1) / kMaxCols;
    recorder.dispatch(pipeline,
                      {vk::read(w.data.sub(chunk.first_row * rb, chunk.rows * rb)), vk::read(args.x),
                       vk::write(args.y)},
                      push, gx, gy, gz);
  }
}

}  // namespace kvtrie::ops
