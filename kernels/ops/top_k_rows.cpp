#include "kernels/ops/top_k_rows.h"

#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
// The merge is one work group a row, its time that of its network's stages (each a barrier): as many
// invocations as the device allows, up to 1024, so that a stage is one compare a thread.
vk::SpecConstants spec_top_k(const vk::Device& d) {
  return {workgroup_up_to(d, 1024)};
}
constexpr OpRegistration kTopK{.op = "top_k_rows", .variants = kVariants, .spec = spec_top_k};
static_assert(kRowChunk == 2048, "top_k_rows.comp's CHUNK");

struct TopKPush {
  uint32_t n, k, chunks, merge;
};
}  // namespace

uint64_t top_k_rows_scratch_bytes(uint32_t rows, uint32_t n, uint32_t k) {
  return 2 * row_chunk_index_offset(rows, n, k);
}

void top_k_rows(vk::CommandRecorder& rec, const Kernels& kernels, vk::BufferView values, uint32_t rows,
                uint32_t n, uint32_t k, vk::BufferView out_index, vk::BufferView out_value,
                vk::BufferView scratch) {
  KVTRIE_CHECK(rows > 0 && n > 0, "top_k_rows: empty rows");
  KVTRIE_CHECK(k > 0 && k <= kTopKRowsMax && k <= n, "top_k_rows: k outside 1..min(n, kTopKRowsMax)");
  KVTRIE_CHECK(values.range >= uint64_t{rows} * n * 4, "top_k_rows: the values are shorter than the rows");
  KVTRIE_CHECK(out_index.range >= uint64_t{rows} * k * 4 && out_value.range >= uint64_t{rows} * k * 4,
               "top_k_rows: an output is shorter than k words a row");
  KVTRIE_CHECK(scratch.range >= top_k_rows_scratch_bytes(rows, n, k), "top_k_rows: the scratch is too short");
  const uint32_t chunks = row_chunks(n);
  const uint64_t half = row_chunk_index_offset(rows, n, k);
  const vk::BufferView candidate_value = scratch.sub(0, half), candidate_index = scratch.sub(half, half);
  const vk::ComputePipeline& pipeline = kernels.pipeline(kTopK);
  const vk::Binding chunk_pass[] = {vk::read(values), vk::write(candidate_value), vk::write(candidate_index),
                                    vk::write(out_index), vk::write(out_value)};
  rec.dispatch(pipeline, std::span<const vk::Binding>(chunk_pass), TopKPush{n, k, chunks, 0}, chunks, rows);
  const vk::Binding merge_pass[] = {vk::read(values), vk::read(candidate_value), vk::read(candidate_index),
                                    vk::write(out_index), vk::write(out_value)};
  rec.dispatch(pipeline, std::span<const vk::Binding>(merge_pass), TopKPush{n, k, chunks, 1}, rows, 1);
}

KVTRIE_REGISTER_OPS(top_k_rows, &kTopK);

}  // namespace kvtrie::kernels
