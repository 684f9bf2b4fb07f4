// Contract: add, the sum of two f32 vectors (add.comp).
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::kernels {

// out = a + b over count values (out may equal a).
void add(vk::CommandRecorder& rec, const Kernels& k, vk::BufferView a, vk::BufferView b, vk::BufferView out,
         uint32_t count);

}  // namespace kvtrie::kernels
