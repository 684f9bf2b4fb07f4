// The op registry (kernels/ops/op_registry.h) against the shader manifest (kernels/shaders/variants.cmake):
// every op file's rows are listed, their variants are embedded, and every embedded kernels shader has a row.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "base/error.h"
#include "kernels/ops/op_registry.h"
#include "kernels/vk/device.h"
#include "kernels/vk/shader_registry.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class OpRegistry : public test::VulkanTest {};

const OpRegistration* find_row(std::string_view op) {
  for (const OpRegistration* row : registered_ops())
    if (row->op == op) return row;
  return nullptr;
}

TEST_F(OpRegistry, RowsAreUniqueAndWhatADeviceRunsIsEmbedded) {
  std::set<std::string_view> ops;
  for (const OpRegistration* row : registered_ops()) {
    EXPECT_TRUE(ops.insert(row->op).second) << "op " << row->op << " registered twice";
    if (row->available && !row->available(context().device())) continue;
    for (uint32_t i = 0; i < variant_count(*row); ++i) {
      if (!registers(*row, i)) continue;
      EXPECT_NE(vk::find_spirv(shader_variant(*row, i)), nullptr) << shader_variant(*row, i);
    }
  }
  // One row of each op file (the generated list names them all).
  for (std::string_view op :
       {"fill", "rms_norm", "rope", "swiglu", "convert", "add", "add_bias", "get_rows", "kv_write", "matvec",
        "matmul", "attention", "repack", "matvec_q8_t1", "quantize_q8"})
    EXPECT_NE(find_row(op), nullptr) << op;
}

TEST_F(OpRegistry, EveryEmbeddedShaderHasARow) {
  std::set<std::string> registered;
  for (const OpRegistration* row : registered_ops())
    for (uint32_t i = 0; i < variant_count(*row); ++i)
      if (registers(*row, i)) registered.insert(shader_variant(*row, i));
  // Shaders that are no op: the fast paths' self-tests and the tensor-core loader on its own (tests only).
  // (The benchmarks' probes are bench/'s.)
  auto test_only = [](std::string_view name) {
    return name.starts_with("selftest_") || name.starts_with("tile_decode_");
  };
  for (const vk::SpirvBlob* blob : vk::all_spirv_blobs()) {
    if (test_only(blob->name)) continue;
    EXPECT_TRUE(registered.count(blob->name)) << blob->name << " has no row";
  }
}

TEST_F(OpRegistry, VariantIndicesNameTheirShaders) {
  const OpRegistration& get_rows = *find_row("get_rows");
  EXPECT_EQ(shader_variant(get_rows, typed_variant(get_rows, TensorType::Q4_K)), "get_rows_q4_k");
  EXPECT_EQ(variant_type(get_rows, typed_variant(get_rows, TensorType::Q6_Kx8)), TensorType::Q6_Kx8);
  const OpRegistration& rms_norm = *find_row("rms_norm");
  EXPECT_EQ(variant_count(rms_norm), 4u);
  EXPECT_EQ(shader_variant(rms_norm, 1), "rms_norm_add_f32");
  EXPECT_EQ(variant_type(rms_norm, 1), std::nullopt);
  // A row sharing its shader and variant list: its own name prefix, and only the variants it registers.
  const OpRegistration& residual = *find_row("matvec_q8_t1l16");
  const uint32_t acc_qnorm = typed_variant(residual, TensorType::Q4_0x8, 3);
  EXPECT_EQ(shader_variant(residual, acc_qnorm), "matvec_q8_acc_qnorm_q4_0x8");
  EXPECT_TRUE(registers(residual, acc_qnorm));
  EXPECT_FALSE(registers(residual, typed_variant(residual, TensorType::Q4_0x8, 0)));
  EXPECT_THROW(typed_variant(residual, TensorType::Q4_0), Error) << "Q4_0 is not tiled";
}

}  // namespace
}  // namespace kvtrie::kernels
