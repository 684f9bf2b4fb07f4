#include "runner/engine/gpu_weights.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>

#include "base/error.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/weight_format.h"
#include "kernels/vk/command_recorder.h"
#include "kernels/vk/device.h"
#include "kernels/vk/staging.h"

namespace kvtrie::engine {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// One tensor to place: where it goes in GpuWeights and where its bytes are in the file.
struct Placement {
  DeviceTensor* out;
  const GgufTensor* tensor;
  size_t block = 0;
  uint64_t offset = 0;
  uint64_t size = 0;  // rounded up to whole 16-byte words: shaders read whole words (the tail is unused)
};

// Tensors placed back to back in one block (one tensor, or the parts of a joined matrix), and the
// joined matrix they form (nullptr for a single tensor).
struct Unit {
  std::vector<Placement> parts;
  DeviceTensor* joined = nullptr;
};

uint32_t cols_of(const GgufTensor* t) {
  return static_cast<uint32_t>(t->shape[0]);
}

// Whether these matrices can be one matrix: same type and row length, and rows of whole 16-byte words
// (so each part starts where the previous ends, aligned for the shaders).
bool joinable(const std::vector<const GgufTensor*>& parts) {
  for (const GgufTensor* t : parts)
    if (t == nullptr || t->type != parts[0]->type || cols_of(t) != cols_of(parts[0])) return false;
  return row_bytes(parts[0]->type, cols_of(parts[0])) % 16 == 0;
}

std::vector<Unit> units(GpuWeights& g, const ModelWeights& w) {
  std::vector<Unit> out;
  auto add = [&](DeviceTensor& d, const GgufTensor* t) {
    if (t) out.push_back({{{&d, t}}});
  };
  // Joined when possible, else as separate tensors.
  auto add_joined = [&](DeviceTensor& joined,
                        std::initializer_list<std::pair<DeviceTensor*, const GgufTensor*>> parts) {
    std::vector<const GgufTensor*> tensors;
    for (const auto& p : parts) tensors.push_back(p.second);
    if (joinable(tensors)) {
      Unit u;
      for (const auto& p : parts) u.parts.push_back({p.first, p.second});
      u.joined = &joined;
      out.push_back(std::move(u));
    } else {
      for (const auto& p : parts) add(*p.first, p.second);
    }
  };
  add(g.token_embd, w.token_embd);
  add(g.output_norm, w.output_norm);
  if (!g.tied) add(g.output, w.output);
  add(g.rope_freqs, w.rope_freqs);
  g.layers.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& lw = w.layers[l];
    DeviceLayer& d = g.layers[l];
    add(d.attn_norm, lw.attn_norm);
    add_joined(d.wqkv, {{&d.wq, lw.wq}, {&d.wk, lw.wk}, {&d.wv, lw.wv}});
    add(d.wo, lw.wo);
    add(d.bq, lw.bq);
    add(d.bk, lw.bk);
    add(d.bv, lw.bv);
    add(d.q_norm, lw.q_norm);
    add(d.k_norm, lw.k_norm);
    add(d.ffn_norm, lw.ffn_norm);
    add_joined(d.w_gate_up, {{&d.w_gate, lw.w_gate}, {&d.w_up, lw.w_up}});
    add(d.w_down, lw.w_down);
  }
  // File order: the upload then reads the mapping front to back (a joined unit where its first part is).
  std::sort(out.begin(), out.end(), [](const Unit& a, const Unit& b) {
    return a.parts[0].tensor->data.data() < b.parts[0].tensor->data.data();
  });
  return out;
}

// Packs the units into blocks of at most block_bytes, each at a binding-aligned offset (a unit's parts
// back to back); returns the block sizes.
std::vector<uint64_t> pack(std::vector<Unit>& plan, uint64_t alignment, uint64_t block_bytes) {
  std::vector<uint64_t> blocks;
  for (Unit& u : plan) {
    uint64_t size = 0;
    for (Placement& p : u.parts) {
      p.size = (p.tensor->data.size() + 15) / 16 * 16;
      size += p.size;
    }
    uint64_t offset = blocks.empty() ? 0 : (blocks.back() + alignment - 1) / alignment * alignment;
    if (blocks.empty() || (offset + size > block_bytes && blocks.back() > 0)) {
      blocks.push_back(0);
      offset = 0;
    }
    for (Placement& p : u.parts) {
      p.block = blocks.size() - 1;
      p.offset = offset;
      offset += p.size;
    }
    blocks.back() = offset;
  }
  return blocks;
}

// Rewrites the matrices with a device format in place (one recording, waited for) and retypes them.
void convert_to_device_formats(vk::Context& context, GpuWeights& g) {
  std::vector<DeviceTensor*> matrices = {&g.token_embd, &g.output};
  for (DeviceLayer& l : g.layers)
    for (DeviceTensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) matrices.push_back(t);
  kernels::Kernels kernels(context, kernels::Prewarm::No);
  vk::CommandRecorder rec(context);
  rec.begin();
  for (DeviceTensor* t : matrices)
    if (t->buffer.valid())
      kernels::repack_to_device_format(rec, kernels, t->view(), t->type, t->rows, t->cols);
  rec.end();
  rec.submit_and_wait();
  for (DeviceTensor* t : matrices) t->type = kernels::device_format(t->type, t->cols);
  for (DeviceLayer& l : g.layers) {
    if (l.wqkv.buffer.valid()) l.wqkv.type = l.wq.type;
    if (l.w_gate_up.buffer.valid()) l.w_gate_up.type = l.w_gate.type;
  }
}

}  // namespace

GpuWeights upload_weights(vk::Context& context, const ModelWeights& w, const ModelConfig& config,
                          uint64_t block_bytes) {
  const auto start = Clock::now();
  GpuWeights g;
  g.tied = config.tied_output || w.output == w.token_embd;
  std::vector<Unit> plan = units(g, w);
  const uint64_t alignment =
      std::max<uint64_t>(256, context.device().info().min_storage_buffer_offset_alignment);
  const std::vector<uint64_t> sizes = pack(plan, alignment, block_bytes);
  for (uint64_t size : sizes) g.bytes += size;

  // The blocks are allocated in order on a thread of their own while the upload copies into those already
  // there: the driver's time per GiB allocated overlaps the host's copying. On failure the rest is skipped.
  std::vector<std::promise<vk::Buffer>> promised(sizes.size());
  std::vector<std::future<vk::Buffer>> allocated;
  for (std::promise<vk::Buffer>& p : promised) allocated.push_back(p.get_future());
  std::atomic<bool> stop{false};
  const vk::Device& device = context.device();
  const std::future<void> allocator = std::async(std::launch::async, [&] {
    for (size_t b = 0; b < sizes.size(); ++b) {
      try {
        if (stop) throw Error("weight block allocation abandoned");
        promised[b].set_value(vk::Buffer(device, sizes[b], vk::MemoryKind::DeviceLocal));
      } catch (...) {
        stop = true;
        promised[b].set_exception(std::current_exception());
      }
    }
  });
  struct StopOnExit {
    std::atomic<bool>& stop;
    ~StopOnExit() { stop = true; }  // an exception below ends the allocations early (then joins them)
  } stop_on_exit{stop};

  vk::Uploader uploader(context);
  g.blocks.reserve(sizes.size());
  uint32_t tensors = 0;
  for (const Unit& u : plan) {
    for (const Placement& p : u.parts) {
      while (g.blocks.size() <= p.block) g.blocks.push_back(allocated[g.blocks.size()].get());
      DeviceTensor& out = *p.out;
      out.type = p.tensor->type;
      out.cols = cols_of(p.tensor);
      out.rows = static_cast<uint32_t>(p.tensor->rows());
      out.buffer.range = g.blocks[p.block].view(p.offset, p.size);
      uploader.upload(g.blocks[p.block], p.offset, std::as_bytes(p.tensor->data));
      ++tensors;
    }
    if (u.joined != nullptr) {
      const Placement& first = u.parts.front();
      uint64_t bytes = 0;
      uint32_t rows = 0;
      for (const Placement& p : u.parts) {
        bytes += p.size;
        rows += p.out->rows;
      }
      *u.joined = *first.out;
      u.joined->rows = rows;
      u.joined->buffer.range = g.blocks[first.block].view(first.offset, bytes);
    }
  }
  uploader.finish();
  convert_to_device_formats(context, g);
  WeightsLoadReport& report = g.load;
  report.weight_bytes = uploader.bytes();
  report.weight_tensors = tensors;
  report.weight_blocks = static_cast<uint32_t>(g.blocks.size());
  report.weights_ms = ms_since(start);
  report.upload_copy_ms = uploader.copy_ms();
  report.upload_wait_ms = uploader.wait_ms();

  // The kernels' prewarm ran beside the upload; the model is ready once it is done too.
  const auto wait_start = Clock::now();
  context.pipelines().finish_background();
  report.pipeline_wait_ms = ms_since(wait_start);
  spdlog::debug(
      "load: weights {:.2f} GB in {:.0f} ms ({} tensors in {} blocks, {} staging submissions); "
      "waited {:.0f} ms for pipelines",
      static_cast<double>(report.weight_bytes) / 1e9, report.weights_ms, report.weight_tensors,
      report.weight_blocks, uploader.submissions(), report.pipeline_wait_ms);
  return g;
}

std::vector<TensorType> weight_types(const ModelWeights& w) {
  std::vector<TensorType> types;
  auto add = [&](const GgufTensor* t) {
    if (!t) return;
    const TensorType type = t->shape.size() == 2 ? kernels::device_format(t->type, cols_of(t)) : t->type;
    if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
  };
  add(w.token_embd);
  add(w.output_norm);
  add(w.output);
  add(w.rope_freqs);
  for (const LayerWeights& lw : w.layers)
    for (const GgufTensor* t : {lw.attn_norm, lw.wq, lw.wk, lw.wv, lw.wo, lw.bq, lw.bk, lw.bv, lw.q_norm,
                                lw.k_norm, lw.ffn_norm, lw.w_gate, lw.w_up, lw.w_down})
      add(t);
  return types;
}

}  // namespace kvtrie::engine
