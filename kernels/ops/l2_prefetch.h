// Contract: l2_prefetch reads byte ranges and discards them (l2_prefetch.comp), so that a later dispatch
// finds them in the L2 cache. It writes nothing but a never-taken store into `sink` (16 bytes) that keeps the
// loads from being optimized away; what it reads is unchanged and no other buffer is touched, so the
// recorder puts no barrier between it and work on other buffers, and the device may run it beside them
// (recorded right after a latency-bound dispatch, it uses the bandwidth that one leaves idle). Records into a
// CommandRecorder from the thread that owns the Context; the views must outlive the recording's execution.
// Throws kvtrie::Error on bad arguments.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// Reads every range (each whole 16-byte words, empty ones skipped) with `groups` work groups (0: 512).
void l2_prefetch(vk::CommandRecorder& rec, const Kernels& k, const std::array<vk::BufferView, 3>& ranges,
                 vk::BufferView sink, uint32_t groups = 0);

}  // namespace kvtrie::kernels
