#include "base/error.h"
#include "kernels/ops/op_util.h"
#include "kernels/ops/ops.h"

namespace kvtrie::kernels {

const char* type_variant(TensorType type) {
  switch (type) {
    case TensorType::F32:
      return "f32";
    case TensorType::F16:
      return "f16";
    case TensorType::BF16:
      return "bf16";
    case TensorType::Q8_0:
      return "q8_0";
    case TensorType::Q4_0:
      return "q4_0";
    case TensorType::Q4_1:
      return "q4_1";
    case TensorType::Q5_0:
      return "q5_0";
    case TensorType::Q5_1:
      return "q5_1";
    case TensorType::Q4_K:
      return "q4_k";
    case TensorType::Q5_K:
      return "q5_k";
    case TensorType::Q6_K:
      return "q6_k";
    case TensorType::Q4_0x8:
      return "q4_0x8";
    case TensorType::Q8_0x8:
      return "q8_0x8";
    case TensorType::Q6_Kx8:
      return "q6_kx8";
  }
  throw Error("unknown tensor type");
}

void get_rows(vk::CommandRecorder& rec, const Kernels& k, const GetRowsArgs& a) {
  KVTRIE_CHECK(a.n % tensor_type_info(a.type).block_elements == 0,
               "get_rows: n is not a whole number of blocks");
  if (a.n_tokens == 0 || a.row_count == 0) return;
  const uint64_t row_bytes = kvtrie::row_bytes(a.type, a.n);
  KVTRIE_CHECK(a.table.range >= row_bytes * a.row_count, "get_rows: table view smaller than its rows");
  const AlignedBinding table = align_binding(k.device(), a.table);
  struct Push {
    uint32_t n_tokens, n, row_bytes, table_byte_offset, row_begin, row_count, out_stride;
  } push{a.n_tokens,  a.n,         static_cast<uint32_t>(row_bytes), table.byte_offset,
         a.row_begin, a.row_count, a.out_stride ? a.out_stride : a.n};
  // One invocation per 8 values of a row (get_rows.comp).
  const Grid grid = grid_1d(div_up(uint64_t{a.n_tokens} * div_up(a.n, 8u), k.workgroup_size("get_rows")));
  rec.dispatch(k.pipeline("get_rows", type_variant(a.type)),
               {vk::read(table.view), vk::read(a.ids), vk::write(a.out)}, push, grid.x, grid.y);
}

}  // namespace kvtrie::kernels
