#include "kernels/ops/argmax_rows.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
constexpr OpRegistration kArgmax{.op = "argmax_rows", .variants = kVariants, .spec = spec_row_reduce};

struct ArgmaxPush {
  uint32_t n, chunk, chunks, merge;
};
}  // namespace

uint64_t argmax_rows_scratch_bytes(uint32_t rows, uint32_t n) {
  return 2 * row_chunk_index_offset(rows, n, 1);
}

void argmax_rows(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView values, uint32_t rows, uint32_t n,
                 vk::BufferView out, vk::BufferView scratch) {
  KVTRIE_CHECK(rows > 0 && n > 0, "argmax_rows: empty rows");
  KVTRIE_CHECK(values.range >= uint64_t{rows} * n * 4, "argmax_rows: the values are shorter than the rows");
  KVTRIE_CHECK(out.range >= uint64_t{rows} * 4, "argmax_rows: the output is shorter than a word a row");
  KVTRIE_CHECK(scratch.range >= argmax_rows_scratch_bytes(rows, n), "argmax_rows: the scratch is too short");
  const uint32_t chunks = row_chunks(n);
  const uint64_t half = row_chunk_index_offset(rows, n, 1);
  const vk::BufferView chunk_value = scratch.sub(0, half), chunk_index = scratch.sub(half, half);
  const vk::ComputePipeline& pipeline = k.pipeline(kArgmax);
  const vk::Binding chunk_pass[] = {vk::read(values), vk::write(chunk_value), vk::write(chunk_index),
                                    vk::write(out)};
  rec.dispatch(pipeline, std::span<const vk::Binding>(chunk_pass), ArgmaxPush{n, kRowChunk, chunks, 0},
               chunks, rows);
  const vk::Binding merge_pass[] = {vk::read(values), vk::read(chunk_value), vk::read(chunk_index),
                                    vk::write(out)};
  rec.dispatch(pipeline, std::span<const vk::Binding>(merge_pass), ArgmaxPush{n, kRowChunk, chunks, 1}, rows,
               1);
}

KVTRIE_REGISTER_OPS(argmax_rows, &kArgmax);

}  // namespace kvtrie::kernels
