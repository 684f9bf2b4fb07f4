// Runtime tests of kernels/vk: device listing, buffers and staging, pipelines, automatic barriers, the
// retire list, failure injection, validation-message counting.
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <utility>
#include <vector>

#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/pipeline.h"
#include "kernels/vk/query_pool.h"
#include "kernels/vk/staging.h"
#include "kernels/vk/vk_check.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::vk {
namespace {

using test::VulkanTest;

struct FillPush {
  uint32_t count;
  float value;
};

class VkRuntime : public VulkanTest {};

TEST_F(VkRuntime, DeviceListingDescribesEveryDeviceAndSelectionPrefersByKind) {
  const std::vector<PhysicalDeviceInfo> devices = list_physical_devices(context().instance());
  ASSERT_FALSE(devices.empty());
  const std::regex ollama(R"(^\s+(.+?):\s+(.+?)\s+\((\d+)\s+MiB,\s+(\d+)\s+MiB\s+free\)$)");
  for (const PhysicalDeviceInfo& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.subgroup_size, 0u);
    EXPECT_GT(d.max_storage_buffer_range, 0u);
    EXPECT_GT(d.device_local_bytes, 0u);
    EXPECT_LE(d.device_local_free, d.device_local_bytes);
    EXPECT_TRUE(std::regex_match(describe_device_line(d), ollama)) << describe_device_line(d);
  }
  // Selection: a discrete device wins over a CPU one whatever the order; an index overrides.
  PhysicalDeviceInfo cpu;
  cpu.kind = DeviceKind::Cpu;
  cpu.index = 0;
  PhysicalDeviceInfo gpu;
  gpu.kind = DeviceKind::Discrete;
  gpu.index = 1;
  PhysicalDeviceInfo igpu;
  igpu.kind = DeviceKind::Integrated;
  igpu.index = 2;
  const std::vector<PhysicalDeviceInfo> fake = {cpu, igpu, gpu};
  EXPECT_EQ(select_physical_device(fake)->kind, DeviceKind::Discrete);
  EXPECT_EQ(select_physical_device(fake, 0u)->kind, DeviceKind::Cpu);
  EXPECT_FALSE(select_physical_device(fake, 3u).has_value());
  EXPECT_FALSE(select_physical_device({}).has_value());
  EXPECT_EQ(context().device().subgroup_size(), context().device().info().subgroup_size);
}

TEST_F(VkRuntime, BufferRoundTripThroughEveryMemoryKind) {
  for (MemoryKind kind :
       {MemoryKind::DeviceLocal, MemoryKind::HostCached, MemoryKind::HostCoherent, MemoryKind::HostWritten}) {
    SCOPED_TRACE(memory_kind_name(kind));
    std::vector<uint32_t> data(1009);
    for (uint32_t& v : data) v = static_cast<uint32_t>(rng()());
    Buffer buffer = make_buffer<uint32_t>(context(), data, kind);
    EXPECT_EQ(buffer.data() != nullptr, kind != MemoryKind::DeviceLocal);
    EXPECT_EQ(download<uint32_t>(context(), buffer, data.size()), data);
    // A partial read at an offset.
    std::vector<uint32_t> tail = download<uint32_t>(context(), buffer, 7, 100 * sizeof(uint32_t));
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), data.begin() + 100));
  }
  EXPECT_EQ(live_allocation_count(), 0u);
}

TEST_F(VkRuntime, FillShaderCoversASizeThatIsNotAMultipleOfTheWorkGroup) {
  const uint32_t count = 1031, local = 64;
  Buffer out(context().device(), count * 4, MemoryKind::DeviceLocal);
  const ComputePipeline& fill = context().pipelines().get("fill_f32", {local});
  EXPECT_EQ(fill.layout().binding_count, 1u);
  EXPECT_EQ(fill.layout().push_constant_size, sizeof(FillPush));
  EXPECT_EQ(&fill, &context().pipelines().get("fill_f32", {local})) << "pipelines are cached by key";
  CommandRecorder rec(context());
  rec.begin();
  rec.fill(out.view(), 0);
  rec.dispatch(fill, {write(out.view())}, FillPush{count - 1, 2.5f}, (count + local - 1) / local);
  rec.end();
  rec.submit_and_wait();
  std::vector<float> got = download<float>(context(), out, count);
  for (uint32_t i = 0; i + 1 < count; ++i) ASSERT_EQ(got[i], 2.5f) << i;
  EXPECT_EQ(got[count - 1], 0.0f) << "the shader must not write past pc.count";
}

TEST_F(VkRuntime, BarriersAreInsertedBetweenDependentAccessesOnly) {
  // fill(A)=1 -> copy A->B -> fill(A)=2 (write after read) -> copy A->C. Without barriers B or C could
  // see the wrong value; independent writes to different buffers need none.
  const uint32_t n = 4099, local = 64;
  Buffer a(context().device(), n * 4, MemoryKind::DeviceLocal);
  Buffer b(context().device(), n * 4, MemoryKind::DeviceLocal);
  Buffer c(context().device(), n * 4, MemoryKind::DeviceLocal);
  Buffer d(context().device(), n * 4, MemoryKind::DeviceLocal);
  const ComputePipeline& fill = context().pipelines().get("fill_f32", {local});
  const uint32_t groups = (n + local - 1) / local;
  CommandRecorder rec(context());
  rec.begin();
  rec.dispatch(fill, {write(a.view())}, FillPush{n, 1.0f}, groups);
  EXPECT_EQ(rec.barrier_count(), 0u);
  rec.dispatch(fill, {write(d.view())}, FillPush{n, 4.0f}, groups);
  EXPECT_EQ(rec.barrier_count(), 0u) << "writes to different buffers are independent";
  rec.copy(a.view(), b.view());
  EXPECT_EQ(rec.barrier_count(), 1u) << "read after write";
  rec.dispatch(fill, {write(a.view())}, FillPush{n, 2.0f}, groups);
  EXPECT_EQ(rec.barrier_count(), 2u) << "write after read";
  rec.copy(a.view(), c.view());
  EXPECT_EQ(rec.barrier_count(), 3u);
  rec.end();
  // Replaying the same recording gives the same result.
  for (int replay = 0; replay < 2; ++replay) {
    rec.submit_and_wait();
    const std::vector<float> vb = download<float>(context(), b, n);
    const std::vector<float> vc = download<float>(context(), c, n);
    const std::vector<float> vd = download<float>(context(), d, n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(vb[i], 1.0f) << i;
      ASSERT_EQ(vc[i], 2.0f) << i;
      ASSERT_EQ(vd[i], 4.0f) << i;
    }
  }
}

TEST_F(VkRuntime, RetireListFreesAResourceOnlyAfterItsSubmissionCompleted) {
  const uint32_t n = 257, local = 64;
  Buffer out(context().device(), n * 4, MemoryKind::HostCached);
  {
    Buffer scratch(context().device(), n * 4, MemoryKind::DeviceLocal);
    context().retire(std::move(scratch));  // nothing in flight: freed at once
  }
  EXPECT_EQ(context().retired_pending(), 0u);
  EXPECT_EQ(live_allocation_count(), 1u);

  Buffer scratch(context().device(), n * 4, MemoryKind::DeviceLocal);
  CommandRecorder rec(context());
  rec.begin();
  rec.dispatch(context().pipelines().get("fill_f32", {local}), {write(scratch.view())}, FillPush{n, 3.0f},
               (n + local - 1) / local);
  rec.copy(scratch.view(), out.view());
  rec.end();
  rec.submit();
  context().retire(std::move(scratch));
  EXPECT_FALSE(scratch.valid());
  EXPECT_EQ(context().retired_pending(), 1u);
  EXPECT_EQ(live_allocation_count(), 2u) << "still in use by the submission";
  rec.wait();
  EXPECT_EQ(context().retired_pending(), 0u);
  EXPECT_EQ(live_allocation_count(), 1u);
  out.invalidate();
  EXPECT_EQ(static_cast<const float*>(out.data())[n - 1], 3.0f);
}

// wait_spinning polls the fence, then blocks past its budget: either way the submission is complete after it,
// its writes visible to the host (a shader writing host memory itself), its retire list run, and it is no
// longer in flight (a second submission is allowed).
TEST_F(VkRuntime, SpinningWaitCompletesTheSubmissionWithinOrPastItsBudget) {
  const uint32_t n = 4099, local = 64;
  Buffer out(context().device(), n * 4, MemoryKind::HostCached);
  CommandRecorder rec(context());
  for (auto [spin, value] :
       {std::pair{std::chrono::microseconds(0), 1.5f}, {std::chrono::seconds(5), 4.0f}}) {
    rec.begin();
    rec.dispatch(context().pipelines().get("fill_f32", {local}), {write(out.view())}, FillPush{n, value},
                 (n + local - 1) / local);
    rec.end();
    rec.submit();
    Buffer scratch(context().device(), 64, MemoryKind::DeviceLocal);
    context().retire(std::move(scratch));
    EXPECT_EQ(context().retired_pending(), 1u);
    rec.wait_spinning(spin);
    EXPECT_FALSE(rec.in_flight());
    EXPECT_EQ(context().retired_pending(), 0u);
    out.invalidate();
    const auto* got = static_cast<const float*>(out.data());
    EXPECT_EQ(got[0], value);
    EXPECT_EQ(got[n - 1], value);
  }
}

TEST_F(VkRuntime, DispatchRejectsMismatchedLayoutsAndOversizedBindings) {
  Buffer a(context().device(), 64, MemoryKind::DeviceLocal);
  const ComputePipeline& fill = context().pipelines().get("fill_f32", {64});
  CommandRecorder rec(context());
  rec.begin();
  EXPECT_THROW(rec.dispatch(fill, {write(a.view()), read(a.view())}, FillPush{1, 0}, 1), Error);
  EXPECT_THROW(rec.dispatch(fill, {write(a.view())}, uint32_t{1}, 1), Error);
  const BufferView huge{a.handle(), 0, context().device().max_storage_buffer_range() + 4};
  EXPECT_THROW(rec.dispatch(fill, {write(huge)}, FillPush{1, 0}, 1), Error);
  EXPECT_THROW(a.view(60, 8), Error);
  EXPECT_THROW(context().pipelines().get("no_such_variant"), Error);
  rec.end();
}

TEST_F(VkRuntime, InjectedAllocationFailureIsAnExpectedOutcomeWithoutLeaks) {
  inject_allocation_failure(2);
  std::optional<Buffer> first = Buffer::try_create(context().device(), 1024, MemoryKind::DeviceLocal);
  std::optional<Buffer> second = Buffer::try_create(context().device(), 1024, MemoryKind::DeviceLocal);
  std::optional<Buffer> third = Buffer::try_create(context().device(), 1024, MemoryKind::DeviceLocal);
  EXPECT_TRUE(first.has_value());
  EXPECT_FALSE(second.has_value());
  EXPECT_TRUE(third.has_value());
  EXPECT_EQ(live_allocation_count(), 2u);
  inject_allocation_failure(1);
  try {
    Buffer fails(context().device(), 1024, MemoryKind::HostCached);
    ADD_FAILURE() << "the injected failure did not happen";
  } catch (const VulkanError& e) {
    EXPECT_EQ(e.result(), VK_ERROR_OUT_OF_DEVICE_MEMORY);
    EXPECT_NE(std::string(e.what()).find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << e.what();
  }
}

TEST_F(VkRuntime, EveryAllocationSiteOfAStagedUploadFailsCleanly) {
  // make_buffer of device-local memory allocates the buffer, then a staging buffer: fail each in turn.
  const std::vector<float> data = random_floats(301);
  for (uint64_t n = 1;; ++n) {
    SCOPED_TRACE("failing allocation " + std::to_string(n));
    inject_allocation_failure(n);
    try {
      Buffer b = make_buffer<float>(context(), data, MemoryKind::DeviceLocal);
      inject_allocation_failure(0);
      EXPECT_EQ(n, 3u) << "two allocation sites expected";
      EXPECT_EQ(download<float>(context(), b, data.size()), data);
      break;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << e.what();
    }
    EXPECT_EQ(live_allocation_count(), 0u) << "leak after a failed allocation";
    ASSERT_LT(n, 10u);
  }
}

TEST_F(VkRuntime, TimestampsAreMonotonic) {
  if (!context().device().info().timestamps) GTEST_SKIP() << "device has no compute timestamps";
  QueryPool queries(context().device(), 2);
  Buffer a(context().device(), 4096, MemoryKind::DeviceLocal);
  CommandRecorder rec(context());
  rec.begin();
  rec.reset_queries(queries, 0, 2);
  rec.timestamp(queries, 0);
  rec.dispatch(context().pipelines().get("fill_f32", {64}), {write(a.view())}, FillPush{1024, 1.0f}, 16);
  rec.timestamp(queries, 1);
  rec.end();
  rec.submit_and_wait();
  const std::vector<double> ns = queries.results_ns(2);
  EXPECT_LE(ns[0], ns[1]);
}

// Span timing: two timestamps around a whole recording, replayed: the device's time on it is positive, no
// longer than the host's wall time around the submission, and the recording has the barriers it has without
// them (they serialize nothing). Off: 0.
TEST_F(VkRuntime, SpanTimingMeasuresTheRecordingWithinTheHostsTimeAndAddsNoBarrier) {
  if (!context().device().info().timestamps) GTEST_SKIP() << "device has no compute timestamps";
  QueryPool span(context().device(), 2);
  Buffer a(context().device(), 1 << 20, MemoryKind::DeviceLocal);
  const ComputePipeline& fill = context().pipelines().get("fill_f32", {64});
  const auto record = [&](CommandRecorder& rec) {
    rec.begin();
    for (float v : {1.0f, 2.0f, 3.0f}) rec.dispatch(fill, {write(a.view())}, FillPush{1 << 18, v}, 4096);
    rec.end();
  };
  CommandRecorder plain(context()), timed(context());
  record(plain);
  timed.set_span_timing(&span);
  record(timed);
  EXPECT_EQ(timed.barrier_count(), plain.barrier_count());
  for (int replay = 0; replay < 2; ++replay) {
    const auto start = std::chrono::steady_clock::now();
    timed.submit_and_wait();
    const double wall_ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(timed.span_ns(), 0.0) << "replay " << replay;
    EXPECT_LE(timed.span_ns(), wall_ns) << "replay " << replay;
  }
  plain.submit_and_wait();
  EXPECT_EQ(plain.span_ns(), 0.0);
  EXPECT_EQ(download<float>(context(), a, 1)[0], 3.0f);
}

TEST_F(VkRuntime, VkCheckNamesTheResultAndTheCall) {
  try {
    VK_CHECK(VK_ERROR_DEVICE_LOST);
    ADD_FAILURE() << "VK_CHECK did not throw";
  } catch (const VulkanError& e) {
    EXPECT_EQ(e.result(), VK_ERROR_DEVICE_LOST);
    EXPECT_NE(std::string(e.what()).find("VK_ERROR_DEVICE_LOST from VK_ERROR_DEVICE_LOST"), std::string::npos)
        << e.what();
  }
  EXPECT_STREQ(result_name(VK_ERROR_OUT_OF_POOL_MEMORY), "VK_ERROR_OUT_OF_POOL_MEMORY");
}

// The families of an NVIDIA card (graphics + compute + transfer, transfer only, compute + transfer) and of
// lavapipe (one of everything).
TEST(QueueFamily, ComputeWithoutGraphicsIsPreferredUnlessTheFirstIsAskedFor) {
  auto family = [](VkQueueFlags flags, uint32_t count = 1) {
    VkQueueFamilyProperties f{};
    f.queueFlags = flags;
    f.queueCount = count;
    return f;
  };
  const VkQueueFlags all = VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT;
  const VkQueueFlags compute = VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT;
  const std::vector<VkQueueFamilyProperties> nvidia = {family(all, 16), family(VK_QUEUE_TRANSFER_BIT, 2),
                                                       family(compute, 8)};
  EXPECT_EQ(pick_compute_family(nvidia, nullptr), 2u);
  EXPECT_EQ(pick_compute_family(nvidia, "any other word"), 2u);
  EXPECT_EQ(pick_compute_family(nvidia, "first"), 0u);
  EXPECT_EQ(pick_compute_family(std::vector{family(all)}, nullptr), 0u);
  // A family that lists compute but has no queues is skipped.
  EXPECT_EQ(pick_compute_family(std::vector{family(all), family(compute, 0)}, nullptr), 0u);
  EXPECT_EQ(pick_compute_family(std::vector{family(VK_QUEUE_TRANSFER_BIT)}, nullptr), std::nullopt);
}

// The device runs on the family the rule picks for its own families.
TEST_F(VkRuntime, DeviceRunsOnThePickedComputeFamily) {
  const Device& device = context().device();
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device.physical(), &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(device.physical(), &n, families.data());
  EXPECT_EQ(std::optional(device.compute_family()),
            pick_compute_family(families, std::getenv("KVTRIE_QUEUE_FAMILY")));
}

// Not a VulkanTest: it provokes a validation error on purpose, in its own instance. Where the layer is not
// installed and the environment does not ask for validation (the GPU machine's runs of this binary), there
// is nothing to count; under KVTRIE_VALIDATION=1 (ctest, CI) a missing layer fails it.
TEST(VkValidation, AnInvalidCallIsCountedAsAMessage) {
  if (!validation_layer_installed() && !validation_requested_by_environment())
    GTEST_SKIP() << "VK_LAYER_KHRONOS_validation is not installed and KVTRIE_VALIDATION=1 is not set";
  Instance instance(InstanceOptions{true});
  ASSERT_TRUE(instance.validation_enabled());
  const std::vector<PhysicalDeviceInfo> devices = list_physical_devices(instance);
  ASSERT_FALSE(devices.empty());
  Device device(instance, *select_physical_device(devices));
  const uint64_t before = validation_message_count();
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = 0;  // invalid: size must be greater than 0
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkResult result = vkCreateBuffer(device.handle(), &info, nullptr, &buffer);
  if (result == VK_SUCCESS && buffer != VK_NULL_HANDLE) vkDestroyBuffer(device.handle(), buffer, nullptr);
  EXPECT_GT(validation_message_count(), before);
  EXPECT_GT(instance.message_count(), 0u);
}

}  // namespace
}  // namespace kvtrie::vk
