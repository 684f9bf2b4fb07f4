#include "kernels/ops/get_rows.h"

#include "base/error.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
// One variant per tensor type (the table's), and with the normed, quantized copy.
constexpr OpRegistration kGetRows{.op = "get_rows", .spec = spec_elementwise, .types = TypeSet::All};
constexpr OpRegistration kGetRowsQnorm{
    .op = "get_rows_qnorm", .spec = spec_elementwise, .types = TypeSet::All};
}  // namespace

void get_rows(vk::CommandRecorder& rec, const Kernels& k, const GetRowsArgs& a) {
  KVTRIE_CHECK(a.n % tensor_type_info(a.type).block_elements == 0,
               "get_rows: n is not a whole number of blocks");
  if (a.n_tokens == 0 || a.row_count == 0) return;
  const uint64_t row_bytes = kvtrie::row_bytes(a.type, a.n);
  KVTRIE_CHECK(a.table.range >= row_bytes * a.row_count, "get_rows: table view smaller than its rows");
  const AlignedBinding table = align_binding(k.device(), a.table);
  const std::optional<QuantizedX>& q = a.quantized_out;
  KVTRIE_CHECK(!q || (a.n % 16 == 0 && q->stride % 16 == 0 && q->stride >= a.n && !q->sum_squares.empty() &&
                      a.norm_weight.range >= uint64_t{a.n} * 4),
               "get_rows: a quantized copy needs whole groups of 16, sums of squares and the norm's weight");
  struct Push {
    uint32_t n_tokens, n, row_bytes, table_byte_offset, row_begin, row_count, out_stride, q_stride;
  } push{a.n_tokens,  a.n,         static_cast<uint32_t>(row_bytes),  table.byte_offset,
         a.row_begin, a.row_count, a.out_stride ? a.out_stride : a.n, q ? q->stride : 0};
  // One invocation per 8 values of a row, 16 with the quantized copy (get_rows.comp's NORM_Q).
  const OpRegistration& op = q ? kGetRowsQnorm : kGetRows;
  const Grid grid = grid_1d(div_up(uint64_t{a.n_tokens} * div_up(a.n, q ? 16u : 8u), k.workgroup_size(op)));
  if (q)
    rec.dispatch(k.pipeline(op, a.type),
                 {vk::read(table.view), vk::read(a.ids), vk::write(a.out), vk::read(a.norm_weight),
                  vk::write(q->bytes), vk::write(q->scales), vk::write(q->sum_squares)},
                 push, grid.x, grid.y);
  else
    rec.dispatch(k.pipeline(op, a.type), {vk::read(table.view), vk::read(a.ids), vk::write(a.out)}, push,
                 grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(get_rows, &kGetRows, &kGetRowsQnorm);

}  // namespace kvtrie::kernels
