#include "kernels/ops/matvec_q8.h"

#include <algorithm>
#include <array>
#include <bit>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "kernels/ops/op_util.h"
#include "kernels/ops/rope.h"

namespace kvtrie::kernels {

namespace {
// Tokens per work group of the batched builds: 8, and 4 for batches of up to 4 (the decode step uses 1).
constexpr uint32_t kBatchTokens = 8, kSmallBatchTokens = 4;
// From this many rows (the logits) one token's lanes of the K-quants and of Q4_0 take kMatvecQ8Rows rows
// each; other types and smaller matrices take one row a lane (matvec_q8.h).
constexpr uint64_t kManyRows = 16384;

// The shader variant's mode: which folds it was built with (matvec_q8.comp's defines), indices of kModes.
// Variants are <mode>_<type>, for the tiled types.
enum Mode : uint32_t { kStore, kNorm, kAcc, kAccQnorm, kNormSwiglu, kNormSwigluQout, kNormQkv };
constexpr std::string_view kModes[] = {
    "store", "norm", "acc", "acc_qnorm", "norm_swiglu", "norm_swiglu_qout", "norm_qkv"};
Mode mode(const MatvecQ8Args& a) {
  if (a.swiglu) return a.quantized_out ? kNormSwigluQout : kNormSwiglu;
  if (a.qkv_pages) return kNormQkv;
  if (a.norm) return kNorm;
  if (a.accumulate) return a.quantized_out ? kAccQnorm : kAcc;
  return kStore;
}

// Which build of matvec_q8 a device runs.
bool matvec_q8_int_dot(const vk::Device& d) {
  return matvec_q8_uses_int_dot(d);
}
bool matvec_q8_portable(const vk::Device& d) {
  return !matvec_q8_uses_int_dot(d);
}
// The device's subgroup size, at least 1 (a device that reports none).
uint32_t subgroup_of(const vk::Device& d) {
  return std::max(d.subgroup_size(), 1u);
}
// {work-group size, rows per lane, tokens per work group, subgroups per work group}; threads per row are a
// push constant.
vk::SpecConstants spec_of(const vk::Device& d, const MatvecQ8Shape& s, uint32_t tokens) {
  return {s.workgroup, s.rows_per_lane, tokens, s.workgroup / subgroup_of(d)};
}
template <uint32_t Rows, uint32_t Tokens>
vk::SpecConstants spec_build(const vk::Device& d) {
  return spec_of(d, {matvec_workgroup_size(d), 0, Rows}, Tokens);
}
// Whether a work group of n invocations fits the device.
bool workgroup_fits(const vk::Device& d, uint32_t n) {
  return n <= d.info().max_workgroup_size_x && n <= d.info().max_workgroup_invocations;
}
// Subgroups a row lane of the residual products (acc, acc_qnorm) takes for every token count: two where 16
// such lanes fit a work group, else one. The decode step's down projection has few work groups of 16 rows
// (256 for the 8B: about 1,000 threads a multiprocessor of an H200 with one subgroup a lane), and twice the
// threads hide its loads' latency where twice the loads a thread did not (matvec_q8_shape).
uint32_t residual_lane_subgroups(const vk::Device& d) {
  return workgroup_fits(d, 16 * 2 * subgroup_of(d)) ? 2 : 1;
}
// One token's products with a quantized output (acc_qnorm, norm_swiglu_qout): 16 lanes of one row (of
// `lane_subgroups` subgroups each), so that a work group makes a group of 16 outputs at the speed of one row
// a lane (matvec_q8_shape).
MatvecQ8Shape lanes16_shape(const vk::Device& d, uint32_t lane_subgroups) {
  const uint32_t tpr = lane_subgroups * subgroup_of(d);
  return {16 * tpr, tpr, kMatvecQ8RowsOne, true, lane_subgroups > 1};
}
vk::SpecConstants spec_lanes16(const vk::Device& d) {
  return spec_of(d, lanes16_shape(d, 1), 1);
}
vk::SpecConstants spec_lanes16_residual(const vk::Device& d) {
  return spec_of(d, lanes16_shape(d, residual_lane_subgroups(d)), 1);
}
// Batches' residual product with a quantized output, whole groups of 16 rows a work group: with lanes of two
// subgroups 8 lanes of 2 rows (8 tokens, H200: the 8B's down 48.3 us against 63.3 for one subgroup's 4 lanes
// of 4 rows, Q8_0 51.5 against 67.0; 4 lanes of 4 rows of two subgroups 70.4 and 72.1; session 28), else 4
// lanes of kMatvecQ8Rows.
MatvecQ8Shape residual_qout_batch_shape(const vk::Device& d) {
  const uint32_t sg = subgroup_of(d);
  if (residual_lane_subgroups(d) == 1) return {matvec_workgroup_size(d), sg, kMatvecQ8Rows};
  return {8 * 2 * sg, 2 * sg, kMatvecQ8RowsPair, false, true};
}
vk::SpecConstants spec_residual_qout_batch(const vk::Device& d) {
  return spec_of(d, residual_qout_batch_shape(d), kBatchTokens);
}

// The registered builds of each matvec_q8 shader: tokens per work group (t1, t4, t8) and rows per lane (r1,
// r2, l16: 16 lanes of one row; none: kMatvecQ8Rows; w: the residual products' lanes of two subgroups in
// work groups of their own size), each with the modes it runs: every fold for one token and for the batched
// build of 4 rows a lane (which quantized_out needs), SwiGLU alone with 1 row a lane, the other products
// with 2.
struct Build {
  uint32_t tokens, rows;
  bool lanes16;
  vk::SpecConstants (*spec)(const vk::Device&);
  uint32_t modes;  // OpRegistration::variant_mask
  bool wide = false;
};
constexpr uint32_t kEveryMode = ~0u, kSwigluMode = 1u << kNormSwiglu;
constexpr uint32_t kPairModes = 1u << kStore | 1u << kNorm | 1u << kAcc | 1u << kNormQkv;
constexpr Build kBuilds[] = {
    {1, kMatvecQ8Rows, false, spec_build<kMatvecQ8Rows, 1>, kEveryMode},                 // t1
    {1, kMatvecQ8RowsOne, false, spec_build<kMatvecQ8RowsOne, 1>, kEveryMode},           // t1r1
    {1, kMatvecQ8RowsOne, true, spec_lanes16, 1u << kAccQnorm | 1u << kNormSwigluQout},  // t1l16
    {1, kMatvecQ8RowsOne, true, spec_lanes16_residual, 1u << kAccQnorm, true},           // t1l16w
    {8, kMatvecQ8Rows, false, spec_build<kMatvecQ8Rows, 8>, kEveryMode},                 // t8
    {8, kMatvecQ8RowsPair, false, spec_residual_qout_batch, 1u << kAccQnorm, true},      // t8w
    {4, kMatvecQ8RowsOne, false, spec_build<kMatvecQ8RowsOne, 4>, kSwigluMode},          // t4r1
    {4, kMatvecQ8RowsPair, false, spec_build<kMatvecQ8RowsPair, 4>, kPairModes},         // t4r2
    {8, kMatvecQ8RowsOne, false, spec_build<kMatvecQ8RowsOne, 8>, kSwigluMode},          // t8r1
    {8, kMatvecQ8RowsPair, false, spec_build<kMatvecQ8RowsPair, 8>, kPairModes},         // t8r2
};
constexpr size_t kBuildCount = std::size(kBuilds);
using BuildNames = std::array<std::string_view, kBuildCount>;
constexpr BuildNames kPortableNames = {
    "matvec_q8_t1",  "matvec_q8_t1r1", "matvec_q8_t1l16", "matvec_q8_t1l16w", "matvec_q8_t8",
    "matvec_q8_t8w", "matvec_q8_t4r1", "matvec_q8_t4r2",  "matvec_q8_t8r1",   "matvec_q8_t8r2"};
constexpr BuildNames kIntDotNames = {
    "matvec_q8i_t1",  "matvec_q8i_t1r1", "matvec_q8i_t1l16", "matvec_q8i_t1l16w", "matvec_q8i_t8",
    "matvec_q8i_t8w", "matvec_q8i_t4r1", "matvec_q8i_t4r2",  "matvec_q8i_t8r1",   "matvec_q8i_t8r2"};
constexpr std::array<OpRegistration, kBuildCount> rows_of(std::string_view shader, const BuildNames& names,
                                                          bool (*available)(const vk::Device&)) {
  std::array<OpRegistration, kBuildCount> rows{};
  for (size_t i = 0; i < kBuildCount; ++i)
    rows[i] = {.op = names[i],
               .variants = kModes,
               .spec = kBuilds[i].spec,
               .available = available,
               .shader = shader,
               .types = TypeSet::Tiled,
               .variant_mask = kBuilds[i].modes};
  return rows;
}
constexpr auto kPortable = rows_of("matvec_q8", kPortableNames, matvec_q8_portable);
constexpr auto kIntDot = rows_of("matvec_q8i", kIntDotNames, matvec_q8_int_dot);

// The row of a device's build for that token group and launch shape.
const OpRegistration& build_row(const vk::Device& device, uint32_t tokens, const MatvecQ8Shape& shape) {
  for (size_t i = 0; i < kBuildCount; ++i)
    if (kBuilds[i].tokens == tokens && kBuilds[i].lanes16 == shape.lanes16 && kBuilds[i].wide == shape.wide &&
        (shape.lanes16 || kBuilds[i].rows == shape.rows_per_lane))
      return (matvec_q8_uses_int_dot(device) ? kIntDot : kPortable)[i];
  throw Error("matvec_q8: no build of " + std::to_string(tokens) + " tokens and " +
              std::to_string(shape.rows_per_lane) + " rows a lane");
}

// quantize_q8: one work group a token, as wide as the device allows up to 512 threads (its shared reduction
// holds 64 subgroups), so that the decode step's single token is quantized in few rounds of loads.
vk::SpecConstants spec_quantize_q8(const vk::Device& d) {
  const uint32_t sg = subgroup_of(d);
  return {std::min({512u, 64 * sg, d.info().max_workgroup_size_x, d.info().max_workgroup_invocations})};
}
enum QuantizeVariant : uint32_t { kQuantizeF32, kQuantizeNormF32 };
constexpr std::string_view kQuantizeVariants[] = {"f32", "norm_f32"};
constexpr OpRegistration kQuantizeQ8{
    .op = "quantize_q8", .variants = kQuantizeVariants, .spec = spec_quantize_q8};
}  // namespace

bool matvec_q8_uses_int_dot(const vk::Device& device) {
  return device.int_dot_enabled();
}

bool matvec_q8_supported(TensorType type, uint64_t cols) {
  return tensor_type_info(type).tiled && cols % tensor_type_info(type).block_elements == 0 &&
         row_bytes(type, cols) % 16 == 0;
}

MatvecQ8Shape matvec_q8_shape(const vk::Device& device, TensorType type, uint64_t rows,
                              uint32_t tokens_per_group, bool swiglu, bool quantized_out, bool accumulate) {
  const uint32_t wg = matvec_workgroup_size(device);
  const uint32_t sg = subgroup_of(device);
  // Each thread of a row lane takes every tpr-th 32-value unit of the row, tpr the same for a product
  // whatever the token count (a subgroup, two for the residual products where they fit), so a row's
  // reduction order never depends on the batch.
  const uint32_t lane_subgroups = accumulate ? residual_lane_subgroups(device) : 1;
  const uint32_t tpr = std::min(sg * lane_subgroups, wg);
  if (quantized_out) {
    const MatvecQ8Shape lanes16 = lanes16_shape(device, lane_subgroups);
    if (tokens_per_group == 1 && workgroup_fits(device, lanes16.workgroup) &&
        (accumulate || (swiglu && (type == TensorType::Q4_0x8 || type == TensorType::Q8_0x8))))
      return lanes16;
    // (Two-subgroup lanes always fit 16 a work group: one token takes lanes16 with them.)
    if (accumulate) return residual_qout_batch_shape(device);
    return {wg, tpr, kMatvecQ8Rows};
  }
  if (tokens_per_group == 1) {
    const bool many_rows_in_four =
        (type == TensorType::Q4_K || type == TensorType::Q5_K || type == TensorType::Q4_0x8) &&
        rows >= kManyRows;
    return {wg, tpr, swiglu || many_rows_in_four ? kMatvecQ8Rows : kMatvecQ8RowsOne};
  }
  return {wg, tpr, swiglu ? kMatvecQ8RowsOne : kMatvecQ8RowsPair};
}

void dispatch_matvec_q8(vk::CommandRecorder& rec, const Kernels& k, const MatvecQ8Args& args,
                        const vk::ComputePipeline& pipeline, const MatvecQ8Shape& shape,
                        uint32_t tokens_per_group) {
  const MatmulArgs& p = args.product;
  const WeightMatrix& w = p.w;
  KVTRIE_CHECK(matvec_q8_supported(w.type, w.cols), "matvec_q8: unsupported weight type or row length");
  KVTRIE_CHECK(!args.swiglu || (args.norm && w.rows % 2 == 0 && !args.accumulate),
               "matvec_q8: swiglu needs a norm and an even row count, and does not accumulate");
  KVTRIE_CHECK(!args.norm || !args.accumulate, "matvec_q8: norm and accumulate do not combine");
  KVTRIE_CHECK(args.x.stride % 16 == 0 && args.x.stride >= w.cols,
               "matvec_q8: x stride below a row or unaligned");
  KVTRIE_CHECK(!args.norm || args.x.sum_squares.range >= args.x.stride / 4 * p.tokens,
               "matvec_q8: a norm reads the groups' sums of squares");
  const uint32_t out_rows = args.swiglu ? w.rows / 2 : w.rows;
  if (out_rows == 0 || p.tokens == 0) return;
  const uint32_t lanes = shape.workgroup / shape.threads_per_row;
  if (const std::optional<QuantizedX>& q = args.quantized_out) {
    // Each work group quantizes its own outputs: whole groups of 16 rows. After a residual add they are
    // normed (the whole of y's rows, so that every group of the next product's input is written).
    const bool normed = args.accumulate && args.out_norm.range >= uint64_t{out_rows} * 4 &&
                        q->sum_squares.range >= q->stride / 4 * p.tokens;
    KVTRIE_CHECK((args.swiglu || normed) && out_rows % 16 == 0 && lanes * shape.rows_per_lane % 16 == 0 &&
                     q->stride % 16 == 0 && q->stride >= out_rows,
                 "matvec_q8: quantized_out needs swiglu or a residual add with the next norm, 16-row work "
                 "groups and whole groups of outputs");
  } else {
    KVTRIE_CHECK(args.out_norm.empty(), "matvec_q8: out_norm goes with quantized_out");
  }
  if (const std::optional<QkvToPages>& kv = args.qkv_pages) {
    // Each work group stores whole pairs of rows (rope's pairs) in one binding of y and of the pool.
    const uint32_t kv_dim = kv->layout.kv_dim;
    KVTRIE_CHECK(
        args.norm && !args.swiglu && kv->rope.mode == RopeMode::Normal && kv->q_rows % 2 == 0 &&
            kv_dim % 2 == 0 && w.rows == kv->q_rows + 2 * kv_dim && lanes * shape.rows_per_lane % 2 == 0 &&
            kv->rope.head_dim > 0 && kv->q_rows % kv->rope.head_dim == 0 && kv_dim % kv->rope.head_dim == 0 &&
            kv->layer < kv->layout.n_layers &&
            w.rows <= k.device().info().max_storage_buffer_range / row_bytes(w.type, w.cols) &&
            !kv->pools[0].empty(),
        "matvec_q8: qkv_pages needs the joined Q/K/V rows in one binding, whole heads and normal rope");
  }
  const uint32_t y_stride = p.y_stride ? p.y_stride : out_rows;
  const uint64_t rb = row_bytes(w.type, w.cols);
  KVTRIE_CHECK(w.data.range >= rb * w.rows, "matvec_q8: weight view is smaller than the matrix");
  const vk::PhysicalDeviceInfo& dev = k.device().info();
  const uint32_t gz = div_up(p.tokens, tokens_per_group);
  KVTRIE_CHECK(gz <= 65535, "matvec_q8: too many tokens for one dispatch");
  // [gate; up] must be one binding: the shader finds a gate row's up row out_rows rows further.
  const std::vector<RowChunk> chunks =
      args.swiglu ? std::vector<RowChunk>{{0, out_rows}}
                  : split_rows(w, dev.max_storage_buffer_range, dev.min_storage_buffer_offset_alignment);
  for (const RowChunk& chunk : chunks) {
    const uint64_t bound_rows = args.swiglu ? w.rows : chunk.rows;
    const AlignedBinding wb = align_binding(k.device(), w.data.sub(chunk.first_row * rb, bound_rows * rb));
    KVTRIE_CHECK(wb.byte_offset % 16 == 0, "matvec_q8: weight rows must start 16-byte aligned");
    struct Push {
      uint32_t rows, k, ntok, row_words, x_stride, y_stride, y_row0, w_offset, up_row, tpr, out_stride;
      float eps;
    } push{chunk.rows,
           w.cols,
           p.tokens,
           static_cast<uint32_t>(rb / 16),
           args.x.stride,
           y_stride,
           chunk.first_row,
           wb.byte_offset / 16,
           args.swiglu ? out_rows : 0,
           shape.threads_per_row,
           args.quantized_out ? args.quantized_out->stride : 0,
           args.norm_eps};
    const Grid grid = grid_1d(div_up(chunk.rows, lanes * shape.rows_per_lane));
    const vk::Binding y = args.accumulate ? vk::read_write(p.y) : vk::write(p.y);
    const vk::Binding common[] = {vk::read(wb.view), vk::read(args.x.bytes), y, vk::read(args.x.scales)};
    if (const std::optional<QkvToPages>& kv = args.qkv_pages) {
      const RopeArgs& rope = kv->rope;
      const struct {
        Push base;
        uint32_t q_rows, kv_dim, head_dim, rope_dims, has_factors;
        float freq_base;
        uint32_t page_tokens, n_layers, layer, pages_per_binding;
      } kv_push{push,
                kv->q_rows,
                kv->layout.kv_dim,
                rope.head_dim,
                rope.rope_dims ? rope.rope_dims : rope.head_dim,
                rope.freq_factors.empty() ? 0u : 1u,
                rope.freq_base,
                kv->layout.page_tokens,
                kv->layout.n_layers,
                kv->layer,
                kv->pages_per_binding ? kv->pages_per_binding : UINT32_MAX / 2};
      const vk::BufferView factors =
          rope.freq_factors.empty() ? rope.positions : rope.freq_factors;  // unread
      vk::BufferView pools[4];
      for (size_t i = 0; i < 4; ++i) pools[i] = kv->pools[i].empty() ? kv->pools[0] : kv->pools[i];
      rec.dispatch(pipeline,
                   {common[0], common[1], common[2], common[3], vk::read(args.x.sum_squares),
                    vk::read(kv->slots), vk::read(rope.positions), vk::read(factors), vk::write(pools[0]),
                    vk::write(pools[1]), vk::write(pools[2]), vk::write(pools[3])},
                   kv_push, grid.x, grid.y, gz);
    } else if (args.quantized_out && args.accumulate)
      rec.dispatch(pipeline,
                   {common[0], common[1], common[2], common[3], vk::read(args.out_norm),
                    vk::write(args.quantized_out->bytes), vk::write(args.quantized_out->scales),
                    vk::write(args.quantized_out->sum_squares)},
                   push, grid.x, grid.y, gz);
    else if (args.quantized_out)
      rec.dispatch(pipeline,
                   {common[0], common[1], common[2], common[3], vk::read(args.x.sum_squares),
                    vk::write(args.quantized_out->bytes), vk::write(args.quantized_out->scales)},
                   push, grid.x, grid.y, gz);
    else if (args.norm)
      rec.dispatch(pipeline, {common[0], common[1], common[2], common[3], vk::read(args.x.sum_squares)}, push,
                   grid.x, grid.y, gz);
    else
      rec.dispatch(pipeline, {common[0], common[1], common[2], common[3]}, push, grid.x, grid.y, gz);
  }
}

void matvec_q8(vk::CommandRecorder& rec, const Kernels& k, const MatvecQ8Args& args) {
  const bool one = args.product.tokens == 1;
  const WeightMatrix& w = args.product.w;
  const bool qout = args.quantized_out.has_value();
  // Token groups: 1, 4 for batches of up to 4 (the 8-token build would compute every token twice over),
  // else 8; quantized outputs of batches only in the 8-token build.
  const uint32_t group = one                                                 ? 1
                         : args.product.tokens <= kSmallBatchTokens && !qout ? kSmallBatchTokens
                                                                             : kBatchTokens;
  MatvecQ8Shape shape =
      matvec_q8_shape(k.device(), w.type, w.rows, group, args.swiglu, qout, args.accumulate);
  if (args.rows_per_lane != 0) {
    KVTRIE_CHECK(
        one && !qout && (args.rows_per_lane == kMatvecQ8Rows || args.rows_per_lane == kMatvecQ8RowsOne),
        "matvec_q8: rows_per_lane is for one token without a quantized output, 1 or kMatvecQ8Rows");
    shape.rows_per_lane = args.rows_per_lane;
  }
  // The build of this token group and shape: t1 / t4 / t8, then r1 / r2 / l16 (kMatvecQ8Rows: none), w.
  const OpRegistration& row = build_row(k.device(), group, shape);
  dispatch_matvec_q8(rec, k, args, k.pipeline(row, w.type, mode(args)), shape, group);
}

void quantize_q8(vk::CommandRecorder& rec, const Kernels& k, const QuantizeQ8Args& a) {
  const uint32_t x_stride = a.x_stride ? a.x_stride : a.cols;
  KVTRIE_CHECK(a.cols % 16 == 0 && x_stride % 4 == 0 && a.out.stride % 16 == 0 && a.out.stride >= a.cols,
               "quantize_q8: rows must be whole groups of 16 and strides aligned");
  KVTRIE_CHECK(a.norm_weight.empty() || a.out.sum_squares.range >= a.out.stride / 4 * a.tokens,
               "quantize_q8: a norm writes the groups' sums of squares");
  if (a.tokens == 0) return;
  KVTRIE_CHECK(a.tokens <= 65535, "quantize_q8: too many tokens for one dispatch");
  struct Push {
    uint32_t k, x_stride, out_stride;
  } push{a.cols, x_stride, a.out.stride};
  if (a.norm_weight.empty())
    rec.dispatch(k.pipeline(kQuantizeQ8, kQuantizeF32),
                 {vk::read(a.x), vk::write(a.out.bytes), vk::write(a.out.scales)}, push, a.tokens);
  else
    rec.dispatch(k.pipeline(kQuantizeQ8, kQuantizeNormF32),
                 {vk::read(a.x), vk::write(a.out.bytes), vk::write(a.out.scales), vk::read(a.norm_weight),
                  vk::write(a.out.sum_squares)},
                 push, a.tokens);
}

KVTRIE_REGISTER_OPS(matvec_q8, &kPortable[0], &kPortable[1], &kPortable[2], &kPortable[3], &kPortable[4],
                    &kPortable[5], &kPortable[6], &kPortable[7], &kIntDot[0], &kIntDot[1], &kIntDot[2],
                    &kIntDot[3], &kIntDot[4], &kIntDot[5], &kIntDot[6], &kIntDot[7], &kQuantizeQ8);

}  // namespace kvtrie::kernels
