#include "kernels/ops/argmax_rows.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
constexpr OpRegistration kArgmax{.op = "argmax_rows", .variants = kVariants, .spec = spec_row_reduce};
}  // namespace

void argmax_rows(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView values, uint32_t rows, uint32_t n,
                 vk::BufferView out) {
  KVTRIE_CHECK(rows > 0 && n > 0, "argmax_rows: empty rows");
  KVTRIE_CHECK(values.range >= uint64_t{rows} * n * 4, "argmax_rows: the values are shorter than the rows");
  KVTRIE_CHECK(out.range >= uint64_t{rows} * 4, "argmax_rows: the output is shorter than a word a row");
  const vk::Binding bindings[] = {vk::read(values), vk::write(out)};
  rec.dispatch(k.pipeline(kArgmax), std::span<const vk::Binding>(bindings), n, rows, 1);
}

KVTRIE_REGISTER_OPS(argmax_rows, &kArgmax);

}  // namespace kvtrie::kernels
