// Contract: CommandRecorder owns a command pool, one command buffer, its fence and the descriptor sets of
// the dispatches recorded into it. It records dispatches and copies and inserts the pipeline barriers
// itself, from each buffer's last tracked access in this recording: a read after a write, or a write after
// a read or write, of the same VkBuffer gets a barrier first (ops never write barriers). A recording starts
// with a barrier against all earlier submissions and ends with one making writes visible to the host, so
// after wait() mapped host memory can be read (call Buffer::invalidate() for non-coherent kinds).
// A recording may be submitted many times (record once, replay); begin() discards it.
// Not thread-safe: one owner thread. The Context and every buffer used must outlive the recording's
// execution (the destructor waits for an in-flight submission).
//
// Profiling: with a QueryPool set (set_profiling), a recording writes a timestamp at its start and after
// every dispatch, and dispatch_times() gives, after wait(), each dispatch's pipeline name and the time since
// the previous timestamp (its run time plus any barrier wait before it). Timestamps serialize dispatches that
// could overlap, so profiled totals are an upper bound of the unprofiled time.
//
// At dispatch it checks that the binding count and push-constant size match the shader (reflected from
// SPIR-V), that every bound range fits maxStorageBufferRange and the offset alignment. A shader has at most
// kMaxBindings bindings. Once warm (descriptor pools grown), recording performs no heap allocation.
#pragma once
#include <vulkan/vulkan.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/vk/buffer.h"
#include "kernels/vk/descriptor.h"
#include "kernels/vk/handle.h"

namespace kvtrie::vk {

class Context;
class ComputePipeline;
class QueryPool;

enum class Access { Read, Write, ReadWrite };
enum class QueueKind {
  Compute,
  Transfer
};  // Transfer falls back to the compute queue when the device has none

// One profiled dispatch: its pipeline's name and its time in nanoseconds.
struct DispatchTime {
  const std::string* name;
  double ns;
};

struct Binding {
  BufferView view;
  Access access;
};

// One region of a multi-region copy: offsets relative to the source and destination views.
struct CopyRegion {
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t size = 0;
};
inline Binding read(BufferView v) {
  return {v, Access::Read};
}
inline Binding write(BufferView v) {
  return {v, Access::Write};
}
inline Binding read_write(BufferView v) {
  return {v, Access::ReadWrite};
}

class CommandRecorder {
 public:
  static constexpr size_t kMaxBindings = 16;

  explicit CommandRecorder(Context& context, QueueKind queue = QueueKind::Compute);
  ~CommandRecorder();
  CommandRecorder(const CommandRecorder&) = delete;
  CommandRecorder& operator=(const CommandRecorder&) = delete;
  CommandRecorder(CommandRecorder&&) = delete;
  CommandRecorder& operator=(CommandRecorder&&) = delete;

  Context& context() const { return *context_; }

  // Starts a new recording (waits for an in-flight submission first, frees the previous descriptor sets).
  void begin();
  // Records one dispatch of groups_x * groups_y * groups_z work groups. push.size() must equal the shader's
  // push-constant block size and bindings.size() its binding count.
  void dispatch(const ComputePipeline& pipeline, std::span<const Binding> bindings,
                std::span<const std::byte> push, uint32_t groups_x, uint32_t groups_y = 1,
                uint32_t groups_z = 1);
  template <typename Push>
  void dispatch(const ComputePipeline& pipeline, std::initializer_list<Binding> bindings, const Push& push,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1) {
    dispatch(pipeline, std::span<const Binding>(bindings.begin(), bindings.size()),
             std::as_bytes(std::span<const Push>(&push, 1)), groups_x, groups_y, groups_z);
  }
  template <typename Push>
  void dispatch(const ComputePipeline& pipeline, std::span<const Binding> bindings, const Push& push,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1) {
    dispatch(pipeline, bindings, std::as_bytes(std::span<const Push>(&push, 1)), groups_x, groups_y,
             groups_z);
  }
  // Copies src.range bytes (dst.range must be at least that).
  void copy(BufferView src, BufferView dst);
  // One vkCmdCopyBuffer of many regions between two views (one barrier check for all of them, where a copy
  // per region would get a barrier between each two writing the same buffer). Regions must lie inside
  // their views; no region may write bytes another region of the call reads or writes.
  void copy(BufferView src, BufferView dst, std::span<const CopyRegion> regions);
  // Fills dst with a repeated 32-bit word (offset and range multiples of 4).
  void fill(BufferView dst, uint32_t word);
  // Timestamps: reset a range of queries before writing them in this recording.
  void reset_queries(QueryPool& pool, uint32_t first, uint32_t count);
  void timestamp(QueryPool& pool, uint32_t index);
  void end();

  // Submits the ended recording; it must not be in flight already.
  void submit();
  // Waits for the submission (no-op when none is in flight) and runs the context's retire list.
  void wait();
  void submit_and_wait() {
    submit();
    wait();
  }
  // Without blocking: whether the submission is complete (true when none is in flight); when it is, does
  // what wait() does.
  bool poll();
  // wait() that polls the fence for up to `spin` first (yielding between polls), then blocks: a step of a few
  // milliseconds is seen done as it completes, not when a blocked thread is woken.
  void wait_spinning(std::chrono::microseconds spin);
  bool in_flight() const { return serial_ != 0; }

  // Timestamps into `pool` from the next begin() on (nullptr: off). Dispatches past the pool's size
  // (minus the start stamp) are not timed. The pool must outlive the recordings made with it.
  void set_profiling(QueryPool* pool);
  // The dispatches of the last recording, in order; call after wait().
  std::vector<DispatchTime> dispatch_times() const;
  // Two timestamps into `pool` from the next begin() on (nullptr: off), at the recording's start and end
  // (they serialize nothing): span_ns() after wait() is the time the device spent on the submission, from
  // its start to its last write, to set beside the host's wall time.
  void set_span_timing(QueryPool* pool);
  double span_ns() const;

  // Counters of the current recording, for tests and profiling.
  uint32_t barrier_count() const { return barriers_; }

 private:
  struct Pending {
    bool read = false;
    bool written = false;
  };
  Pending* find_pending(VkBuffer buffer);
  // Inserts a barrier when any of these accesses conflicts with a pending one, then records them.
  void track(std::span<const Binding> bindings);
  void barrier(VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
               VkAccessFlags dst_access);

  Context* context_;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkPipelineStageFlags stages_ = 0;  // the stages work of this queue runs in
  CommandPoolHandle pool_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;  // freed with pool_
  FenceHandle fence_;
  DescriptorAllocator descriptors_;
  // Buffers accessed since the last barrier: a small flat list (cleared, never shrunk) so that recording
  // allocates nothing once warm.
  std::vector<std::pair<VkBuffer, Pending>> pending_;
  std::vector<VkBufferCopy> regions_;  // scratch of copy(src, dst, regions), reused
  QueryPool* profile_pool_ = nullptr;
  QueryPool* span_pool_ = nullptr;
  std::vector<const std::string*> profiled_;  // the pipeline name of each timestamp after the first
  bool recording_ = false;
  bool ended_ = false;
  uint64_t serial_ = 0;  // the context's submission serial while in flight, else 0
  uint32_t barriers_ = 0;
};

}  // namespace kvtrie::vk
