#include "kernels/vk/command_recorder.h"

#include <spdlog/spdlog.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/vk/context.h"
#include "kernels/vk/pipeline.h"
#include "kernels/vk/query_pool.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {
namespace {
constexpr VkAccessFlags kAllReadWrite = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkAccessFlags kAllWrite = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
}  // namespace

CommandRecorder::CommandRecorder(Context& context, QueueKind queue)
    : context_(&context), descriptors_(context.device()) {
  const Device& device = context.device();
  uint32_t family = device.compute_family();
  queue_ = device.compute_queue();
  stages_ = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  if (queue == QueueKind::Transfer && device.transfer_family()) {
    family = *device.transfer_family();
    queue_ = device.transfer_queue();
    stages_ = VK_PIPELINE_STAGE_TRANSFER_BIT;  // a transfer-only queue has no compute stage
  }

  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = family;
  VkCommandPool pool;
  VK_CHECK(vkCreateCommandPool(device.handle(), &pool_info, nullptr, &pool));
  pool_ = CommandPoolHandle(device.handle(), pool);

  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VK_CHECK(vkAllocateCommandBuffers(device.handle(), &alloc, &commands_));

  VkFenceCreateInfo fence_info{};
  fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  VkFence fence;
  VK_CHECK(vkCreateFence(device.handle(), &fence_info, nullptr, &fence));
  fence_ = FenceHandle(device.handle(), fence);
}

CommandRecorder::~CommandRecorder() {
  try {
    wait();
  } catch (const std::exception& e) {
    spdlog::error("vulkan: waiting for a submission at recorder teardown failed: {}", e.what());
  }
}

void CommandRecorder::begin() {
  wait();
  VK_CHECK(vkResetCommandBuffer(commands_, 0));
  descriptors_.reset();
  pending_.clear();
  barriers_ = 0;
  VkCommandBufferBeginInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  VK_CHECK(vkBeginCommandBuffer(commands_, &info));
  recording_ = true;
  ended_ = false;
  if (span_pool_ != nullptr) {
    vkCmdResetQueryPool(commands_, span_pool_->handle(), 0, 2);
    vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, span_pool_->handle(), 0);
  }
  // Earlier submissions may have written anything this recording reads: one barrier against all of them.
  barrier(stages_, kAllWrite, stages_, kAllReadWrite);
  barriers_ = 0;  // the entry barrier is not an automatically inserted one
  profiled_.clear();
  if (profile_pool_ != nullptr) {
    vkCmdResetQueryPool(commands_, profile_pool_->handle(), 0, profile_pool_->count());
    vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, profile_pool_->handle(), 0);
  }
}

void CommandRecorder::set_profiling(QueryPool* pool) {
  KVTRIE_CHECK(!recording_ || ended_, "set_profiling() while recording");
  KVTRIE_CHECK(pool == nullptr || pool->count() >= 2, "a profiling pool needs at least 2 queries");
  profile_pool_ = pool;
  profiled_.clear();
  profiled_.reserve(pool ? pool->count() : 0);
}

void CommandRecorder::set_span_timing(QueryPool* pool) {
  KVTRIE_CHECK(!recording_ || ended_, "set_span_timing() while recording");
  KVTRIE_CHECK(pool == nullptr || pool->count() >= 2, "a span needs 2 queries");
  span_pool_ = pool;
}

double CommandRecorder::span_ns() const {
  KVTRIE_CHECK(!in_flight(), "span_ns() before wait()");
  if (span_pool_ == nullptr) return 0;
  const std::vector<double> ns = span_pool_->results_ns(2);
  return ns[1] - ns[0];
}

std::vector<DispatchTime> CommandRecorder::dispatch_times() const {
  KVTRIE_CHECK(!in_flight(), "dispatch_times() before wait()");
  std::vector<DispatchTime> out;
  if (profile_pool_ == nullptr || profiled_.empty()) return out;
  const std::vector<double> ns = profile_pool_->results_ns(static_cast<uint32_t>(profiled_.size()) + 1);
  for (size_t i = 0; i < profiled_.size(); ++i) out.push_back({profiled_[i], ns[i + 1] - ns[i]});
  return out;
}

void CommandRecorder::barrier(VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                              VkAccessFlags dst_access) {
  if (stages_ == VK_PIPELINE_STAGE_TRANSFER_BIT) {
    src_access &= VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
    dst_access &= VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
  }
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = src_access;
  mb.dstAccessMask = dst_access;
  vkCmdPipelineBarrier(commands_, src, dst, 0, 1, &mb, 0, nullptr, 0, nullptr);
  ++barriers_;
}

CommandRecorder::Pending* CommandRecorder::find_pending(VkBuffer buffer) {
  for (auto& [b, p] : pending_)
    if (b == buffer) return &p;
  return nullptr;
}

void CommandRecorder::track(std::span<const Binding> bindings) {
  bool hazard = false;
  for (const Binding& b : bindings) {
    const Pending* p = find_pending(b.view.buffer);
    if (p == nullptr) continue;
    const bool writes = b.access != Access::Read;
    if (p->written || (writes && p->read)) hazard = true;
  }
  if (hazard) {
    // One global memory barrier orders every earlier access, so all tracking starts over after it.
    barrier(stages_, kAllWrite, stages_, kAllReadWrite);
    pending_.clear();
  }
  for (const Binding& b : bindings) {
    Pending* p = find_pending(b.view.buffer);
    if (p == nullptr) p = &pending_.emplace_back(b.view.buffer, Pending{}).second;
    if (b.access != Access::Write) p->read = true;
    if (b.access != Access::Read) p->written = true;
  }
}

void CommandRecorder::dispatch(const ComputePipeline& pipeline, std::span<const Binding> bindings,
                               std::span<const std::byte> push, uint32_t groups_x, uint32_t groups_y,
                               uint32_t groups_z) {
  KVTRIE_CHECK(recording_ && !ended_, "dispatch outside begin()/end()");
  KVTRIE_CHECK(stages_ & VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, "dispatch on a transfer-only queue");
  const ShaderLayout& layout = pipeline.layout();
  KVTRIE_CHECK(bindings.size() == layout.binding_count,
               pipeline.name() + ": " + std::to_string(bindings.size()) + " bindings given, the shader has " +
                   std::to_string(layout.binding_count));
  KVTRIE_CHECK(push.size() == layout.push_constant_size,
               pipeline.name() + ": " + std::to_string(push.size()) +
                   " push-constant bytes given, the shader has " + std::to_string(layout.push_constant_size));
  KVTRIE_CHECK(bindings.size() <= kMaxBindings, pipeline.name() + ": more bindings than kMaxBindings");
  const PhysicalDeviceInfo& info = context_->device().info();
  VkDescriptorBufferInfo infos[kMaxBindings];
  VkWriteDescriptorSet writes[kMaxBindings];
  const VkDescriptorSet set = descriptors_.allocate(pipeline.set_layout());
  for (size_t i = 0; i < bindings.size(); ++i) {
    const BufferView& v = bindings[i].view;
    KVTRIE_CHECK(!v.empty(), pipeline.name() + ": binding " + std::to_string(i) + " is empty");
    KVTRIE_CHECK(v.range <= info.max_storage_buffer_range,
                 pipeline.name() + ": binding " + std::to_string(i) + " spans " + std::to_string(v.range) +
                     " bytes, over maxStorageBufferRange (split the tensor)");
    KVTRIE_CHECK(v.offset % info.min_storage_buffer_offset_alignment == 0,
                 pipeline.name() + ": binding " + std::to_string(i) + " offset is not aligned to " +
                     std::to_string(info.min_storage_buffer_offset_alignment));
    infos[i] = {v.buffer, v.offset, v.range};
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = set;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(context_->device().handle(), static_cast<uint32_t>(bindings.size()), writes, 0,
                         nullptr);
  track(bindings);
  vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle());
  vkCmdBindDescriptorSets(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline_layout(), 0, 1, &set,
                          0, nullptr);
  if (!push.empty())
    vkCmdPushConstants(commands_, pipeline.pipeline_layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                       static_cast<uint32_t>(push.size()), push.data());
  if (groups_x > 0 && groups_y > 0 && groups_z > 0) vkCmdDispatch(commands_, groups_x, groups_y, groups_z);
  if (profile_pool_ != nullptr && profiled_.size() + 1 < profile_pool_->count()) {
    profiled_.push_back(&pipeline.name());
    vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, profile_pool_->handle(),
                        static_cast<uint32_t>(profiled_.size()));
  }
}

void CommandRecorder::copy(BufferView src, BufferView dst) {
  KVTRIE_CHECK(recording_ && !ended_, "copy outside begin()/end()");
  KVTRIE_CHECK(dst.range >= src.range, "copy destination smaller than its source");
  if (src.range == 0) return;
  const Binding b[] = {read(src), write(dst)};
  track(b);
  VkBufferCopy region{src.offset, dst.offset, src.range};
  vkCmdCopyBuffer(commands_, src.buffer, dst.buffer, 1, &region);
}

void CommandRecorder::copy(BufferView src, BufferView dst, std::span<const CopyRegion> regions) {
  KVTRIE_CHECK(recording_ && !ended_, "copy outside begin()/end()");
  if (regions.empty()) return;
  regions_.clear();
  for (const CopyRegion& r : regions) {
    KVTRIE_CHECK(r.size > 0 && r.src_offset + r.size <= src.range && r.dst_offset + r.size <= dst.range,
                 "copy region outside its views");
    regions_.push_back({src.offset + r.src_offset, dst.offset + r.dst_offset, r.size});
  }
  const Binding b[] = {read(src), write(dst)};
  track(b);
  vkCmdCopyBuffer(commands_, src.buffer, dst.buffer, static_cast<uint32_t>(regions_.size()), regions_.data());
}

void CommandRecorder::fill(BufferView dst, uint32_t word) {
  KVTRIE_CHECK(recording_ && !ended_, "fill outside begin()/end()");
  KVTRIE_CHECK(dst.offset % 4 == 0 && dst.range % 4 == 0, "fill needs 4-byte aligned offset and size");
  const Binding b[] = {write(dst)};
  track(b);
  vkCmdFillBuffer(commands_, dst.buffer, dst.offset, dst.range, word);
}

void CommandRecorder::reset_queries(QueryPool& pool, uint32_t first, uint32_t count) {
  KVTRIE_CHECK(recording_ && !ended_, "reset_queries outside begin()/end()");
  vkCmdResetQueryPool(commands_, pool.handle(), first, count);
}

void CommandRecorder::timestamp(QueryPool& pool, uint32_t index) {
  KVTRIE_CHECK(recording_ && !ended_, "timestamp outside begin()/end()");
  vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool.handle(), index);
}

void CommandRecorder::end() {
  KVTRIE_CHECK(recording_ && !ended_, "end() without begin()");
  // Device writes must be visible to the host after the fence (read-backs of mapped memory).
  if (span_pool_ != nullptr)
    vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, span_pool_->handle(), 1);
  const uint32_t counted = barriers_;
  barrier(stages_, kAllWrite, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  barriers_ = counted;
  VK_CHECK(vkEndCommandBuffer(commands_));
  ended_ = true;
}

void CommandRecorder::submit() {
  KVTRIE_CHECK(ended_, "submit() of a recording that was not ended");
  KVTRIE_CHECK(!in_flight(), "submit() while the previous submission is in flight");
  VkSubmitInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  info.commandBufferCount = 1;
  info.pCommandBuffers = &commands_;
  VK_CHECK(vkQueueSubmit(queue_, 1, &info, fence_.get()));
  serial_ = context_->begin_submission();
}

void CommandRecorder::wait() {
  if (!in_flight()) return;
  const VkFence fence = fence_.get();
  VK_CHECK(vkWaitForFences(context_->device().handle(), 1, &fence, VK_TRUE, UINT64_MAX));
  VK_CHECK(vkResetFences(context_->device().handle(), 1, &fence));
  context_->end_submission(std::exchange(serial_, 0));
}

void CommandRecorder::wait_spinning(std::chrono::microseconds spin) {
  const auto until = std::chrono::steady_clock::now() + spin;
  while (!poll() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  wait();  // blocks only past the spin; returns at once when poll() saw it done
}

bool CommandRecorder::poll() {
  if (!in_flight()) return true;
  const VkResult status = vkGetFenceStatus(context_->device().handle(), fence_.get());
  if (status == VK_NOT_READY) return false;
  VK_CHECK(status);
  wait();  // signalled: returns at once and does the bookkeeping
  return true;
}

}  // namespace kvtrie::vk
