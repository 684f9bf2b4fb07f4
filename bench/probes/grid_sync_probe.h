// Contract: grid_sync_probe, the cost of a grid-wide barrier inside one dispatch, for benchmarks on a GPU
// (bench/shaders/grid_sync_probe.comp), a registration row of bench's own: never prewarmed.
// Records into a CommandRecorder (barriers are the recorder's job) from the thread that owns the
// Context; every view must outlive the recording's execution. Throws kvtrie::Error on bad arguments.
#pragma once
#include <cstdint>

#include "kernels/ops/kernels.h"
#include "kernels/vk/buffer.h"
#include "kernels/vk/command_recorder.h"

namespace kvtrie::bench {

// `groups` work groups run `phases` phases of one add a work group, with sync a grid-wide barrier after
// each (sync holds two words, zero before the dispatch; sync[1] counts waits that gave up): the cost of a
// dependent level inside one dispatch, for benchmarks on a GPU only (every group must be resident at once).
void grid_sync_probe(vk::CommandRecorder& rec, const kernels::Kernels& k, vk::BufferView sync,
                     vk::BufferView data, uint32_t groups, uint32_t phases, bool with_sync);

}  // namespace kvtrie::bench
