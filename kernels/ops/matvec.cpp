#include "kernels/ops/matvec.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr uint32_t kMaxCols = 8;   // tokens per work group, MAX_COLS in matvec.comp
constexpr uint32_t kRows = 4;      // rows per work group, NUM_ROWS in matvec.comp
constexpr uint32_t kRows1 = 8;     // NUM_ROWS of the single-token build
constexpr uint32_t kRows1Acc = 4;  // ... of its fused residual build (matvec1_acc)

// The reduction order follows the work-group size, fixed per device.
vk::SpecConstants spec_matvec(const vk::Device& d) {
  return {matvec_workgroup_size(d)};
}
// matvec.comp: the batched build, the single-token build, and that build with x = silu(gate) * up.
constexpr OpRegistration kMatvec{.op = "matvec", .spec = spec_matvec, .types = TypeSet::All};
constexpr OpRegistration kMatvec1{.op = "matvec1", .spec = spec_matvec, .types = TypeSet::All};
constexpr OpRegistration kMatvec1Swiglu{.op = "matvec1_swiglu", .spec = spec_matvec, .types = TypeSet::All};
// The fused builds of float weights (matvec_fused), one variant per float type: one token, and batches.
constexpr std::string_view kFloatTypes[] = {"f32", "f16", "bf16"};
constexpr OpRegistration kMatvec1Norm{.op = "matvec1_norm", .variants = kFloatTypes, .spec = spec_matvec};
constexpr OpRegistration kMatvec1NormSwiglu{
    .op = "matvec1_norm_swiglu", .variants = kFloatTypes, .spec = spec_matvec};
constexpr OpRegistration kMatvec1Acc{.op = "matvec1_acc", .variants = kFloatTypes, .spec = spec_matvec};
constexpr OpRegistration kMatvecNorm{.op = "matvec_norm", .variants = kFloatTypes, .spec = spec_matvec};
constexpr OpRegistration kMatvecNormSwiglu{
    .op = "matvec_norm_swiglu", .variants = kFloatTypes, .spec = spec_matvec};
constexpr OpRegistration kMatvecAcc{.op = "matvec_acc", .variants = kFloatTypes, .spec = spec_matvec};
// The batched normed products' input (norm_input.comp): the products' work-group size.
constexpr OpRegistration kNormInput{.op = "norm_input", .spec = spec_matvec};
// kFloatTypes' index of a float type, -1 for the others.
int float_variant(TensorType type) {
  switch (type) {
    case TensorType::F32:
      return 0;
    case TensorType::F16:
      return 1;
    case TensorType::BF16:
      return 2;
    default:
      return -1;
  }
}
}  // namespace

uint32_t matvec_workgroup_size(const vk::Device& device) {
  // Four subgroups balance the subgroup reduction against per-row parallelism; matvec.comp's shared
  // reduction holds up to 64 subgroups.
  const uint32_t sg = std::max<uint32_t>(device.subgroup_size(), 1);
  return std::min(std::clamp<uint32_t>(4 * sg, 32, 256), device.info().max_workgroup_size_x);
}

std::vector<RowChunk> split_rows(const WeightMatrix& w, uint64_t max_range, uint64_t alignment) {
  const uint64_t rb = row_bytes(w.type, w.cols);
  const uint64_t slack = alignment + 4;
  KVTRIE_CHECK(rb > 0 && rb + slack <= max_range, "a weight row does not fit one shader binding");
  const uint64_t per_chunk = std::min<uint64_t>((max_range - slack) / rb, w.rows);
  std::vector<RowChunk> chunks;
  for (uint64_t r = 0; r < w.rows; r += per_chunk)
    chunks.push_back(
        {static_cast<uint32_t>(r), static_cast<uint32_t>(std::min<uint64_t>(per_chunk, w.rows - r))});
  return chunks;
}

void dispatch_matmul_variant(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                             const vk::ComputePipeline& pipeline, uint32_t rows_per_group,
                             uint32_t tokens_per_group, vk::BufferView extra) {
  const WeightMatrix& w = args.w;
  KVTRIE_CHECK(w.cols % tensor_type_info(w.type).block_elements == 0,
               "matmul: row length is not whole blocks");
  if (w.rows == 0 || args.tokens == 0) return;
  const vk::PhysicalDeviceInfo& dev = k.device().info();
  const uint64_t rb = row_bytes(w.type, w.cols);
  KVTRIE_CHECK(w.data.range >= rb * w.rows, "matmul: weight view is smaller than the matrix");
  const uint32_t x_stride = args.x_stride ? args.x_stride : w.cols;
  const uint32_t y_stride = args.y_stride ? args.y_stride : w.rows;
  const uint32_t gz = div_up(args.tokens, tokens_per_group);
  KVTRIE_CHECK(gz <= 65535, "matmul: too many tokens for one dispatch");
  for (const RowChunk& chunk :
       split_rows(w, dev.max_storage_buffer_range, dev.min_storage_buffer_offset_alignment)) {
    const AlignedBinding wb = align_binding(k.device(), w.data.sub(chunk.first_row * rb, chunk.rows * rb));
    const MatmulPush push{chunk.rows, w.cols,   args.tokens,     static_cast<uint32_t>(rb),
                          x_stride,   y_stride, chunk.first_row, wb.byte_offset};
    // Row groups beyond 65535 wrap into y (the shaders flatten x and y); tokens go along z.
    const Grid grid = grid_1d(div_up(chunk.rows, rows_per_group));
    if (extra.empty())
      rec.dispatch(pipeline, {vk::read(wb.view), vk::read(args.x), vk::write(args.y)}, push, grid.x, grid.y,
                   gz);
    else
      rec.dispatch(pipeline, {vk::read(wb.view), vk::read(args.x), vk::write(args.y), vk::read(extra)}, push,
                   grid.x, grid.y, gz);
  }
}

namespace {

void check_x_stride(const MatmulArgs& args) {
  // Block types read x as vec4: token starts must be 16-byte aligned.
  const uint32_t x_stride = args.x_stride ? args.x_stride : args.w.cols;
  KVTRIE_CHECK(tensor_type_info(args.w.type).block_elements == 1 || x_stride % 4 == 0,
               "matvec: x_stride must be a multiple of 4 floats for block types");
}

}  // namespace

void matvec(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args) {
  check_x_stride(args);
  // One token takes the single-token build (same per-token arithmetic, fewer registers), except Q4_0 whose
  // single-token build sums in another order: it would not be bit-identical to the batched build.
  if (args.tokens == 1 && args.w.type != TensorType::Q4_0)
    dispatch_matmul_variant(rec, k, args, k.pipeline(kMatvec1, args.w.type), kRows1, 1);
  else
    dispatch_matmul_variant(rec, k, args, k.pipeline(kMatvec, args.w.type), kRows, kMaxCols);
}

void matvec_single_token(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args) {
  KVTRIE_CHECK(args.tokens == 1, "matvec_single_token: one token");
  check_x_stride(args);
  dispatch_matmul_variant(rec, k, args, k.pipeline(kMatvec1, args.w.type), kRows1, 1);
}

void matvec_single_token_swiglu(vk::CommandRecorder& rec, const Kernels& k, const MatmulArgs& args,
                                vk::BufferView up) {
  KVTRIE_CHECK(args.tokens == 1, "matvec_single_token_swiglu: one token");
  check_x_stride(args);
  dispatch_matmul_variant(rec, k, args, k.pipeline(kMatvec1Swiglu, args.w.type), kRows1, 1, up);
}

bool matvec_fused_supported(const vk::Device& device, const WeightMatrix& w) {
  const vk::PhysicalDeviceInfo& dev = device.info();
  return float_variant(w.type) >= 0 &&
         row_bytes(w.type, w.cols) * w.rows + dev.min_storage_buffer_offset_alignment + 4 <=
             dev.max_storage_buffer_range;
}

void matvec_fused(vk::CommandRecorder& rec, const Kernels& k, const FusedMatvecArgs& args) {
  const WeightMatrix& w = args.w;
  KVTRIE_CHECK(matvec_fused_supported(k.device(), w), "matvec fused: float weights in one binding");
  KVTRIE_CHECK(!args.swiglu || (!args.norm.empty() && w.rows % 2 == 0),
               "matvec fused: swiglu needs a norm and an even row count");
  KVTRIE_CHECK(args.norm.empty() || !args.accumulate, "matvec fused: a norm and accumulate do not combine");
  KVTRIE_CHECK(!args.norm.empty() || args.accumulate, "matvec fused: a norm or accumulate");
  if (w.rows == 0 || args.tokens == 0) return;
  const uint64_t rb = row_bytes(w.type, w.cols);
  KVTRIE_CHECK(w.data.range >= rb * w.rows, "matvec fused: weight view is smaller than the matrix");
  const uint32_t out_rows = args.swiglu ? w.rows / 2 : w.rows;
  const uint32_t x_stride = args.x_stride ? args.x_stride : w.cols;
  const uint32_t y_stride = args.y_stride ? args.y_stride : out_rows;
  const bool one = args.tokens == 1;
  const uint32_t gz = div_up(args.tokens, one ? 1 : kMaxCols);
  KVTRIE_CHECK(gz <= 65535, "matvec fused: too many tokens for one dispatch");
  struct Push {
    MatmulPush base;
    float eps;
    uint32_t up_row;
  };
  const AlignedBinding wb = align_binding(k.device(), w.data.sub(0, rb * w.rows));
  vk::BufferView x = args.x, norm = args.norm;
  uint32_t product_x_stride = x_stride;
  if (!one && !args.norm.empty()) {
    // x times the norm's weights and each token's sum of squares first, as the one-token build makes them.
    KVTRIE_CHECK(args.normed_x.range >= uint64_t{args.tokens} * w.cols * 4 &&
                     args.norm_sums.range >= uint64_t{args.tokens} * 4,
                 "matvec fused: a batch's norm needs normed_x and norm_sums scratch");
    const struct { uint32_t k, x_stride, out_stride; } norm_push{w.cols, x_stride, w.cols};
    rec.dispatch(k.pipeline(kNormInput),
                 {vk::read(args.x), vk::read(args.norm), vk::write(args.normed_x), vk::write(args.norm_sums)},
                 norm_push, args.tokens);
    x = args.normed_x;
    norm = args.norm_sums;
    product_x_stride = w.cols;
  }
  const Push push{{out_rows, w.cols, args.tokens, static_cast<uint32_t>(rb), product_x_stride, y_stride, 0,
                   wb.byte_offset},
                  args.eps,
                  out_rows};
  const OpRegistration& row = args.swiglu       ? (one ? kMatvec1NormSwiglu : kMatvecNormSwiglu)
                              : args.accumulate ? (one ? kMatvec1Acc : kMatvecAcc)
                                                : (one ? kMatvec1Norm : kMatvecNorm);
  const uint32_t rows = !one ? kRows : args.accumulate ? kRows1Acc : kRows1;
  const Grid grid = grid_1d(div_up(out_rows, args.swiglu ? rows / 2 : rows));
  const vk::ComputePipeline& pipeline = k.pipeline(row, static_cast<uint32_t>(float_variant(w.type)));
  if (args.accumulate)
    rec.dispatch(pipeline, {vk::read(wb.view), vk::read(x), vk::read_write(args.y)}, push, grid.x, grid.y,
                 gz);
  else
    rec.dispatch(pipeline, {vk::read(wb.view), vk::read(x), vk::write(args.y), vk::read(norm)}, push, grid.x,
                 grid.y, gz);
}

KVTRIE_REGISTER_OPS(matvec, &kMatvec, &kMatvec1, &kMatvec1Swiglu, &kMatvec1Norm, &kMatvec1NormSwiglu,
                    &kMatvec1Acc, &kMatvecNorm, &kMatvecNormSwiglu, &kMatvecAcc, &kNormInput);

}  // namespace kvtrie::kernels
