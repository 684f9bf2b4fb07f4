#include "kernels/ops/weight_format.h"

#include <array>
#include <string_view>

#include "base/error.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/op_util.h"

namespace kvtrie::kernels {

namespace {
// repack.comp: one variant per device format (the index of kDeviceFormats), all of them prewarmed (the load
// repacks whatever formats its weights take).
constexpr auto kFormatVariants = [] {
  std::array<std::string_view, kDeviceFormats.size()> names{};
  for (size_t i = 0; i < names.size(); ++i) names[i] = kDeviceFormats[i].variant;
  return names;
}();
constexpr OpRegistration kRepack{.op = "repack", .variants = kFormatVariants, .spec = spec_none};

uint32_t format_index(TensorType format) {
  for (size_t i = 0; i < kDeviceFormats.size(); ++i)
    if (kDeviceFormats[i].type == format) return static_cast<uint32_t>(i);
  throw Error("repack: not a device format");
}

// Groups each repack work group handles (GROUPS_PER_WG in repack.comp).
uint32_t groups_per_workgroup(TensorType format) {
  return format == TensorType::Q4_0x8 ? 16 : format == TensorType::Q8_0x8 ? 8 : 1;
}
}  // namespace

TensorType device_format(TensorType file_type, uint64_t cols) {
  for (const TensorTypeInfo& format : kDeviceFormats)
    if (format.file_type == file_type && cols % format.block_elements == 0) return format.type;
  return file_type;
}

bool is_device_format(TensorType type) {
  return tensor_type_info(type).file_type != type;
}

TensorType file_type_of(TensorType type) {
  return tensor_type_info(type).file_type;
}

void repack_to_device_format(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView data,
                             TensorType file_type, uint32_t rows, uint32_t cols) {
  const TensorType format = device_format(file_type, cols);
  if (format == file_type || rows == 0) return;
  const uint64_t bytes = row_bytes(file_type, cols) * rows;
  KVTRIE_CHECK(data.range >= bytes, "repack: view smaller than the tensor");
  const AlignedBinding b = align_binding(k.device(), data.sub(0, bytes));
  KVTRIE_CHECK(b.byte_offset % 4 == 0, "repack: tensor not 4-byte aligned");
  const uint64_t groups = bytes / tensor_type_info(format).block_bytes;
  KVTRIE_CHECK(groups < (1ull << 32), "repack: tensor too large");
  struct Push {
    uint32_t groups, word_offset;
  } push{static_cast<uint32_t>(groups), b.byte_offset / 4};
  const Grid grid = grid_1d(div_up(groups, groups_per_workgroup(format)));
  rec.dispatch(k.pipeline(kRepack, format_index(format)), {vk::read_write(b.view)}, push, grid.x, grid.y);
}

KVTRIE_REGISTER_OPS(weight_format, &kRepack);

}  // namespace kvtrie::kernels
