// Contract: read_probe, a read-bandwidth probe for benchmarks (bench/shaders/read_probe.comp), a
// registration row of bench's own: never prewarmed.
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::bench {

// Reads src (a multiple of 16 bytes) once with `threads` invocations (rounded up to whole work groups),
// `unroll` (1, 2, 4 or 8) loads in flight a thread, writing one word per invocation to sink: a
// read-bandwidth probe for benchmarks.
void read_probe(vk::CommandRecorder& rec, const kernels::Kernels& k, vk::BufferView src, vk::BufferView sink,
                uint32_t threads, uint32_t unroll = 1);
// The invocations read_probe runs for `threads` (whole work groups): sink holds a word for each.
uint32_t read_probe_invocations(const kernels::Kernels& k, uint32_t threads);

}  // namespace kvtrie::bench
