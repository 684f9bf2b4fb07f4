// The shader toolchain's fast paths (cmake/glslc.cmake, kernels/shader_features.h, kernels/vk/fast_paths.h):
// the configure-time probes agree with the embedded shaders; a device enables a path exactly when it offers
// it and the shaders exist; and each self-test shader computes what the CPU computes wherever the device
// runs it. A test whose path is missing skips and says why (the compiler or the device).
//
// Under ctest these run on lavapipe with validation (bookworm's Mesa 22.3 offers integer dot product, not
// accelerated, and no cooperative matrix). On an NVIDIA GPU run the binary itself, which picks the
// discrete device (ctest points Vulkan at lavapipe):  build/tests/kernels_test_fast_paths
// (KVTRIE_VALIDATION=1 only with a validation layer that knows VK_KHR_cooperative_matrix: bookworm's 1.3.239
// does not.)
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/shader_features.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/pipeline.h"
#include "kernels/vk/shader_registry.h"
#include "runner/model/quantization.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::vk {
namespace {

using test::VulkanTest;

constexpr const char* kNoCompiler = "this build's glslc cannot compile ";
constexpr const char* kInstallHint = " (scripts/install-deps provides trixie's glslc)";

class FastPaths : public VulkanTest {
 protected:
  const Device& device() { return context().device(); }

  // D = A * B for 16x16 matrices of multiples of 1/4 in [-2, 2]: exact in f16, and every sum of 16 products
  // (multiples of 1/16 below 64 in magnitude) is exact in f32 whatever the order, so the GPU must match
  // exactly.
  void expect_16x16_product(const char* variant) {
    std::vector<float> a(256), b(256);
    std::uniform_int_distribution<int> quarter(-8, 8);
    for (float& v : a) v = quarter(rng()) / 4.0f;
    for (float& v : b) v = quarter(rng()) / 4.0f;
    std::vector<uint16_t> a16(256), b16(256);
    for (int i = 0; i < 256; ++i) {
      a16[i] = fp32_to_fp16(a[i]);
      b16[i] = fp32_to_fp16(b[i]);
    }
    Buffer ab = device_buffer(a16), bb = device_buffer(b16);
    Buffer db(device(), 256 * sizeof(float), MemoryKind::DeviceLocal);
    CommandRecorder rec(context());
    rec.begin();
    // One work group of exactly one subgroup: the cooperative matrices belong to that subgroup.
    const ComputePipeline& pipeline = context().pipelines().get(variant, {device().subgroup_size()});
    const Binding bindings[] = {read(ab.view()), read(bb.view()), write(db.view())};
    rec.dispatch(pipeline, bindings, std::span<const std::byte>(), 1);  // no push constants
    rec.end();
    rec.submit_and_wait();
    const std::vector<float> d = read_back<float>(db, 256);
    int bad = 0;
    for (int m = 0; m < 16 && bad < 5; ++m)
      for (int n = 0; n < 16 && bad < 5; ++n) {
        float expected = 0;
        for (int k = 0; k < 16; ++k) expected += a[m * 16 + k] * b[k * 16 + n];
        if (d[m * 16 + n] != expected) {
          ADD_FAILURE() << variant << ": D[" << m << "][" << n << "] = " << d[m * 16 + n] << ", CPU "
                        << expected;
          ++bad;
        }
      }
  }
};

TEST_F(FastPaths, ProbesMatchTheEmbeddedSelfTestShaders) {
  std::cout << "shader compiler: " << kShaderCompiler << "\n"
            << "device: " << device().info().name << "; offers " << describe_fast_paths(device().info())
            << "; enabled " << device().describe_enabled_fast_paths() << "\n";
  EXPECT_EQ(kShadersHaveIntDot, find_spirv("selftest_int_dot") != nullptr);
  EXPECT_EQ(kShadersHaveKhrCoopmat, find_spirv("selftest_khr_coopmat") != nullptr);
  EXPECT_EQ(kShadersHaveNvCoopmat2, find_spirv("selftest_nv_coopmat2") != nullptr);
  EXPECT_TRUE(kShadersHaveNvCoopmat) << "matmul_coopmat_* is compiled unconditionally";
  // NV coopmat2 shaders are SPIR-V 1.6 (TARGET_ENV vulkan1.3); the portable ones stay SPIR-V 1.5.
  if (const SpirvBlob* blob = find_spirv("selftest_nv_coopmat2")) {
    EXPECT_EQ(blob->words[1], 0x00010600u);
  }
  EXPECT_EQ(find_spirv("fill_f32")->words[1], 0x00010500u);
}

TEST_F(FastPaths, APathIsEnabledExactlyWhenTheDeviceOffersItAndItsShadersExist) {
  const Device& d = device();
  const PhysicalDeviceInfo& info = d.info();
  const FastPathSupport& f = info.fast;
  EXPECT_EQ(d.int_dot_enabled(), kShadersHaveIntDot && f.int_dot);
  EXPECT_EQ(d.khr_coopmat_enabled(), kShadersHaveKhrCoopmat && f.khr_coopmat && info.vulkan_memory_model);
  EXPECT_EQ(d.nv_coopmat2_enabled(), kShadersHaveNvCoopmat2 && d.khr_coopmat_enabled() && f.nv_coopmat2 &&
                                         f.nv_coopmat2_features.all() &&
                                         info.usable_api_version >= VK_API_VERSION_1_3);
  EXPECT_EQ(d.subgroup_size_control_enabled(), f.subgroup_size_control);
  EXPECT_LE(info.usable_api_version, kInstanceApiVersion);
  // A feature is only known where Vulkan 1.3 or its extension makes it so.
  if (f.int_dot) {
    EXPECT_TRUE(info.usable_api_version >= VK_API_VERSION_1_3 || f.int_dot_extension);
  }
  if (f.subgroup_size_control) {
    EXPECT_LE(f.min_subgroup_size, info.subgroup_size);
    EXPECT_GE(f.max_subgroup_size, info.subgroup_size);
  }
  const CoopMatShape f16_16x16x16{.m = 16, .n = 16, .k = 16};
  if (!d.khr_coopmat_enabled()) {
    EXPECT_FALSE(d.khr_coopmat_supports(f16_16x16x16));
  }
  for (const CoopMatShape& s : f.khr_coopmat_shapes) {
    SCOPED_TRACE(describe_shape(s));
    EXPECT_GT(s.m * s.n * s.k, 0u);
    if (d.khr_coopmat_enabled() && info.shader_float16 && info.shader_int8) {
      EXPECT_TRUE(d.khr_coopmat_supports(s));
    }
  }
  EXPECT_EQ(describe_shape({.m = 16,
                            .n = 8,
                            .k = 32,
                            .a = VK_COMPONENT_TYPE_SINT8_KHR,
                            .b = VK_COMPONENT_TYPE_SINT8_KHR,
                            .c = VK_COMPONENT_TYPE_SINT32_KHR,
                            .result = VK_COMPONENT_TYPE_SINT32_KHR,
                            .saturating = true}),
            "16x8x32 s8*s8+s32->s32 sat");
  EXPECT_FALSE(d.describe_enabled_fast_paths().empty());
}

int32_t byte_of(uint32_t word, int lane) {
  return static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * lane)));
}
int32_t unsigned_byte_of(uint32_t word, int lane) {
  return static_cast<uint8_t>(word >> (8 * lane));
}

TEST_F(FastPaths, PackedIntegerDotProductsMatchTheCpu) {
  if (!kShadersHaveIntDot) GTEST_SKIP() << kNoCompiler << "GL_EXT_integer_dot_product" << kInstallHint;
  if (!device().int_dot_enabled())
    GTEST_SKIP() << device().info().name << " lacks shaderIntegerDotProduct (Vulkan 1.3 or "
                 << "VK_KHR_shader_integer_dot_product)";
  const uint32_t count = 1001;  // not a multiple of the work group
  std::vector<uint32_t> a(count), b(count);
  for (uint32_t i = 0; i < count; ++i) {
    a[i] = static_cast<uint32_t>(rng()());
    b[i] = static_cast<uint32_t>(rng()());
  }
  a[0] = 0x80808080u;  // -128 in every lane: the extremes
  b[0] = 0xff7f80ffu;  // lanes -1, -128, 127, -1 signed; 255, 128, 127, 255 unsigned
  Buffer ab = device_buffer(a), bb = device_buffer(b);
  Buffer out(device(), uint64_t{count} * 8, MemoryKind::DeviceLocal);
  const uint32_t local = 64;
  CommandRecorder rec(context());
  rec.begin();
  rec.dispatch(context().pipelines().get("selftest_int_dot", {local}),
               {read(ab.view()), read(bb.view()), write(out.view())}, count, (count + local - 1) / local);
  rec.end();
  rec.submit_and_wait();
  const std::vector<int32_t> got = read_back<int32_t>(out, uint64_t{count} * 2);
  int bad = 0;
  for (uint32_t i = 0; i < count && bad < 5; ++i) {
    int32_t both_signed = 0, mixed = 0;
    for (int lane = 0; lane < 4; ++lane) {
      both_signed += byte_of(a[i], lane) * byte_of(b[i], lane);
      mixed += byte_of(a[i], lane) * unsigned_byte_of(b[i], lane);
    }
    if (got[2 * i] != both_signed || got[2 * i + 1] != mixed) {
      ADD_FAILURE() << "element " << i << ": got (" << got[2 * i] << ", " << got[2 * i + 1] << "), CPU ("
                    << both_signed << ", " << mixed << ")";
      ++bad;
    }
  }
}

// What the 16x16x16 f16 self-tests need of the device beyond their extension.
std::string missing_for_f16_16x16x16(const Device& d) {
  if (!d.khr_coopmat_supports({.m = 16, .n = 16, .k = 16}))
    return "no 16x16x16 f16*f16+f32->f32 subgroup multiply";
  if (!d.has_16bit_storage()) return "no storageBuffer16BitAccess";
  return "";
}

TEST_F(FastPaths, KhrCooperativeMatrix16x16x16MatchesTheCpu) {
  if (!kShadersHaveKhrCoopmat) GTEST_SKIP() << kNoCompiler << "GL_KHR_cooperative_matrix" << kInstallHint;
  if (!device().khr_coopmat_enabled())
    GTEST_SKIP() << device().info().name << " lacks VK_KHR_cooperative_matrix (with the Vulkan memory model)";
  if (const std::string missing = missing_for_f16_16x16x16(device()); !missing.empty())
    GTEST_SKIP() << device().info().name << ": " << missing;
  expect_16x16_product("selftest_khr_coopmat");
}

TEST_F(FastPaths, NvCooperativeMatrix2TensorLoadsMatchTheCpu) {
  if (!kShadersHaveNvCoopmat2) GTEST_SKIP() << kNoCompiler << "GL_NV_cooperative_matrix2" << kInstallHint;
  if (!device().nv_coopmat2_enabled())
    GTEST_SKIP() << device().info().name
                 << " lacks VK_NV_cooperative_matrix2 with all its features on Vulkan 1.3";
  if (const std::string missing = missing_for_f16_16x16x16(device()); !missing.empty())
    GTEST_SKIP() << device().info().name << ": " << missing;
  expect_16x16_product("selftest_nv_coopmat2");
}

}  // namespace
}  // namespace kvtrie::vk
