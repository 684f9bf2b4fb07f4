// Contract: the kvtrie-bench subcommands, one function each; each opens its own Vulkan Context, runs its
// measurement and emits Rows (bench_common.h). They throw kvtrie::Error / InputError on failure (the CLI
// prints the message and exits non-zero). Single thread (main); GpuEngine runs its own engine thread.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/perf/bench_common.h"
#include "runner/engine/batch_tokens.h"

namespace kvtrie::bench {

// load: GgufFile::open -> GpuEngine constructed (weights uploaded, pipelines created): "load to ready".
struct LoadOptions {
  std::filesystem::path model;
};
void run_load(const CommonOptions& common, const LoadOptions& options);

// prefill: one sequence's prompt through GpuModel::forward in chunks of max_batch_tokens.
struct PrefillOptions {
  std::filesystem::path model;
  uint32_t prompt = 512;
  uint32_t max_batch_tokens = engine::kDefaultBatchTokens;
  bool profile = false;  // also time the last chunk of one more prefill per dispatch (prefill_profile rows)
  bool deterministic = false;    // GpuModelOptions::deterministic
  uint32_t attention_split = 0;  // GpuModelOptions::attention_split (0: the default)
  bool coopmat2 = false;         // GpuModelOptions::coopmat2
  bool f32_x = false;            // !GpuModelOptions::f16_x
  uint32_t k_splits = 0;         // GpuModelOptions::k_splits
  bool paged_decode = false;     // !GpuModelOptions::decode_attention
  std::string
      tiles;  // GpuModelOptions::f16x_tiles: "qkv=T,o=T,gate_up=T,down=T" (any of them) or "T" for all
};
void run_prefill(const CommonOptions& common, const PrefillOptions& options);

// decode: `sequences` sequences with `context` tokens of KV each, one token per sequence per step.
struct DecodeOptions {
  std::filesystem::path model;
  uint32_t context = 512;
  uint32_t sequences = 1;
  uint32_t tokens = 128;              // decode steps timed
  double read_bandwidth = 4.44e12;    // bytes/s, for the bandwidth bound
  bool profile = false;               // also time one step per dispatch (a decode_profile row per op)
  bool span = false;                  // also `tokens` steps timed by the device from start to end
  bool deterministic = false;         // GpuModelOptions::deterministic
  uint32_t attention_split = 0;       // GpuModelOptions::attention_split (0: the default)
  uint32_t attention_key_lanes = 0;   // GpuModelOptions::attention_key_lanes
  bool no_prefetch = false;           // GpuModelOptions::l2_prefetch Off
  bool prefetch_o = false;            // ... Custom, with GpuModelOptions::prefetch_plan's o
  uint32_t prefetch_ffn_mib = 0;      // ... and ffn_mib
  uint32_t prefetch_groups = 0;       // ... and groups
  bool greedy = false;                // Batch::greedy_only: the argmax on the GPU, not the logits
  bool ahead = false;                 // greedy steps submitted one ahead, fed on the GPU (GpuModel::submit)
  uint32_t logits_rows_per_lane = 0;  // GpuModelOptions::logits_rows_per_lane
  bool logits_copy = false;           // GpuModelOptions::logits_copy
  bool blocking_wait = false;         // GpuModelOptions::spin_wait_us 0
  uint32_t k_splits = 0;              // GpuModelOptions::k_splits
  uint32_t q8_max_tokens = 0;         // GpuModelOptions::q8_max_tokens
  bool paged_decode = false;          // !GpuModelOptions::decode_attention
  bool shader_stats = false;  // also the driver's statistics of every pipeline (a shader_stats row each)
};
void run_decode(const CommonOptions& common, const DecodeOptions& options);

// multiturn: conversations sharing a system prompt through GpuEngine, cache on and (as a baseline) off.
struct MultiturnOptions {
  std::filesystem::path model;
  uint32_t conversations = 32;
  uint32_t turns = 5;
  uint32_t system = 2048;
  uint32_t user = 256;
  uint32_t answer = 128;
  uint32_t parallel = 8;
  uint64_t kv_device_mib = 0;  // 0: the engine's default (capped at one binding)
  uint64_t kv_host_mib = 0;    // 0: the engine's default (as large as the device tier)
  bool baseline = true;        // also run with the cache effectively off
  float temperature = 0;       // 0: greedy; else the sampler's defaults (top-k 40, top-p 0.95, min-p 0.05)
  float repeat_penalty = 1;    // over the last 64 tokens (Ollama's default: 1.1); 1: none
  bool gpu_top_candidates = true;  // GpuEngineConfig::gpu_top_candidates
  bool greedy_ahead = true;        // GpuEngineConfig::greedy_ahead
};
void run_multiturn(const CommonOptions& common, const MultiturnOptions& options);

// sample: Sampler::sample on one row of `vocab` logits, `draws` times a repeat, per sampling setting.
struct SampleOptions {
  uint32_t vocab = 128256;  // llama3's
  uint32_t draws = 1000;
};
void run_sample(const CommonOptions& common, const SampleOptions& options);

// copy: host<->device page copies through VkPageStore, against one plain vkCmdCopyBuffer.
struct CopyOptions {
  uint32_t pages = 1024;
  uint32_t batch = 256;
  uint32_t layers = 32, kv_dim = 1024, page_tokens = 16;  // llama3-8b: 2 MiB pages
};
void run_copy(const CommonOptions& common, const CopyOptions& options);

// promote: a host-tier hit through KvCache::acquire + sync over VkPageStore (demoting another prompt to
// make room, as in the daemon), with host chunks committed on use and ahead of use, then warm; with disk_dir,
// a disk hit after a restart (page cache dropped).
struct PromoteOptions {
  uint32_t pages = 511;  // the prompt's pages (511: an 8,176-token prompt of 16-token pages)
  uint32_t layers = 32, kv_dim = 1024, page_tokens = 16;  // llama3-8b: 2 MiB pages
  uint64_t commit_ahead_mib = 0;                          // 0: one prompt's KV, as the engine does
  std::filesystem::path disk_dir;                         // empty: no disk leg
  uint32_t readers = 8;                                   // disk tier reads in flight
};
void run_promote(const CommonOptions& common, const PromoteOptions& options);

// disk-read: DiskPageStore::load_run of `pages` page files per reader count, against a plain sequential
// read of the same files (page cache dropped before each). CPU and disk only.
struct DiskReadOptions {
  std::filesystem::path dir;  // page files are written here (and removed after unless keep)
  uint32_t pages = 511;
  uint32_t layers = 32, kv_dim = 1024, page_tokens = 16;
  std::string readers = "1,2,4,8";
  bool keep = false;
};
void run_disk_read(const CommonOptions& common, const DiskReadOptions& options);

// bandwidth: device-local -> device-local vkCmdCopyBuffer (no read-only shader exists in kernels/ yet).
struct BandwidthOptions {
  uint64_t mib = 2048;
  std::vector<uint32_t> unrolls = {1, 2, 4, 8};  // read_probe's loads in flight a thread, each tried
};
void run_bandwidth(const CommonOptions& common, const BandwidthOptions& options);

// kernel: one matrix product dispatched many times (chained with barriers, and independent), per-dispatch
// time and weight bandwidth, against a chain of empty dispatches.
struct KernelOptions {
  std::string type = "Q4_0";
  std::string path = "auto";  // auto, deterministic, tiled, coopmat
  uint32_t rows = 4096, cols = 4096, tokens = 1;
  uint32_t dispatches = 64;
  std::string sync_groups;  // grid sizes for the grid-sync probe, comma-separated (GPU only; empty: none)
};
void run_kernel(const CommonOptions& common, const KernelOptions& options);

// sweep-matvec: the decode products of a model's shapes for several weight types, legacy matvec against
// matvec_q8 built with each rows-per-lane value, chained as in a forward pass over rotating weight copies.
struct SweepMatvecOptions {
  std::string model = "llama3-8b";  // shapes: llama3-8b or llama3-1b
  std::string types = "Q4_0,Q4_K,Q8_0,Q6_K";
  std::string tokens = "1,8,32";          // tokens per product
  std::string rows_per_lane = "1,2,4,8";  // matvec_q8 variants
  std::string variants = "q8,q8i";        // q8: the portable build, q8i: integer dot products (legacy always)
  std::string threads_per_row = "0";      // matvec_q8 threads per row lane (0: the op's own choice)
  std::string workgroups = "0";           // matvec_q8 work-group sizes (0: the op's own choice)
  std::string mode;  // matvec_q8 fold for every shape (store, norm, acc, acc_qnorm, norm_swiglu);
                     // empty: each shape's own, as the forward pass folds it
  std::string
      shapes;  // the model's shapes to run (qkv, o, gate_up, down, logits), comma-separated; empty: all
  uint32_t dispatches = 64;
  uint64_t rotate_mib = 512;  // device memory the weight copies span (well past the L2 cache)
  std::string probe;          // bench's tuning build instead (nodot: the loads without the arithmetic)
  // Every dispatch writes outputs of its own, so no barrier comes between them and they overlap: what the
  // products would take without a level's drain and launch.
  bool independent = false;
  bool shader_stats = false;  // then the driver's statistics of every pipeline it made
};
void run_sweep_matvec(const CommonOptions& common, const SweepMatvecOptions& options);

// sweep-matmul: the prefill products of a model's shapes on the tensor-core path, per tile and extension.
struct SweepMatmulOptions {
  std::string model = "llama3-8b";
  std::string types = "Q4_0,Q4_K";
  std::string tokens = "512";         // prompt tokens per product, comma-separated
  std::string extensions = "NV,KHR";  // also KHR-xh (x as f16), CM2 and KHR-noload, KHR-nomul: Q4_0 probes
                                      // without loads / multiplies
  std::string tiles = "4x2x2x4,2x2x2x2,2x2x4x4,4x2x2x2,2x4x4x2,2x2x2x4";  // sg_m x sg_n x tm x tn
  std::string cm2_tiles =
      "256x128x128k32,256x128x256k32,256x256x128k32,128x64x64k32,256x128x128k64,256x64x128k32";
  std::string k_splits = "1";  // split-K counts per tile, comma-separated (1: none, 0: matmul's choice)
  uint32_t dispatches = 16;
};
void run_sweep_matmul(const CommonOptions& common, const SweepMatmulOptions& options);

// sweep-attention: decode attention (split pass + combine, every layer) of a model's shape per context,
// batch and split size, timed by GPU timestamps with the L2 cache evicted between layers.
struct SweepAttentionOptions {
  std::string model = "llama3-8b";
  std::string contexts = "512,1024,2048,4096,8192";
  std::string sequences = "1,8";
  std::string splits = "32,64,128,256,512";
  std::string variants = "paged";  // split-pass builds: paged (the engine's), probe1..probe5 (attention.comp)
  uint64_t evict_mib = 256;        // device memory read between layers (0: none)
  bool merge_in_pass =
      false;  // decode variants: the last split merges them (split_counters), as decode steps do
};
void run_sweep_attention(const CommonOptions& common, const SweepAttentionOptions& options);

}  // namespace kvtrie::bench
