// The device weight formats: the device's in-place conversion (repack_to_device_format) gives exactly the
// bytes of the CPU reference regrouping (tests/support/device_format.h), touches nothing outside the
// tensor, and is skipped where a matrix's rows are not whole groups; device_format() picks the formats.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/ops/weight_format.h"
#include "kernels/vk/command_recorder.h"
#include "tests/support/device_format.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::kernels {
namespace {

class WeightFormatTest : public test::VulkanTest {};

TEST_F(WeightFormatTest, DeviceConversionMatchesReferenceAndStaysInsideTheTensor) {
  std::uniform_int_distribution<int> byte(0, 255);
  for (TensorType type : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q6_K}) {
    const TensorType format = device_format(type, 4096);
    SCOPED_TRACE(tensor_type_info(format).name);
    // 7 rows of 4096 values, 20 bytes into a buffer with guard bytes around them.
    const uint32_t rows = 7, cols = 4096;
    const uint64_t size = row_bytes(type, cols) * rows, front = 20;
    std::vector<uint8_t> all(front + size + 64);
    for (uint8_t& b : all) b = static_cast<uint8_t>(byte(rng()));
    vk::Buffer buf = device_buffer(all);
    Kernels k(context(), Prewarm::No);
    vk::CommandRecorder rec(context());
    rec.begin();
    repack_to_device_format(rec, k, buf.view(front, size), type, rows, cols);
    rec.end();
    rec.submit_and_wait();
    const std::vector<uint8_t> got = read_back<uint8_t>(buf, all.size());
    const std::vector<uint8_t> want =
        test::to_device_format(format, cols, std::span<const uint8_t>(all.data() + front, size));
    EXPECT_TRUE(std::equal(got.begin(), got.begin() + front, all.begin()))
        << "bytes before the tensor changed";
    EXPECT_TRUE(std::equal(got.begin() + front, got.begin() + front + size, want.begin()))
        << "converted tensor differs from the reference";
    EXPECT_TRUE(std::equal(got.begin() + front + size, got.end(), all.begin() + front + size))
        << "bytes after the tensor changed";
  }
}

TEST(WeightFormat, FormatsNeedWholeGroups) {
  EXPECT_EQ(device_format(TensorType::Q4_0, 4096), TensorType::Q4_0x8);
  EXPECT_EQ(device_format(TensorType::Q4_0, 896), TensorType::Q4_0) << "896 is not whole groups of 256";
  EXPECT_EQ(device_format(TensorType::Q8_0, 14336), TensorType::Q8_0x8);
  EXPECT_EQ(device_format(TensorType::Q6_K, 14336), TensorType::Q6_Kx8);
  EXPECT_EQ(device_format(TensorType::Q6_K, 3072), TensorType::Q6_K) << "Q6_Kx8 groups are 2048 values";
  EXPECT_EQ(device_format(TensorType::Q4_K, 4096), TensorType::Q4_K) << "already 16-byte aligned";
  for (TensorType f : {TensorType::Q4_0x8, TensorType::Q8_0x8, TensorType::Q6_Kx8}) {
    EXPECT_TRUE(is_device_format(f));
    EXPECT_EQ(row_bytes(f, 4096 * 4), row_bytes(file_type_of(f), 4096 * 4)) << "a row keeps its size";
  }
}

}  // namespace
}  // namespace kvtrie::kernels
