// kvtrie-bench: GPU measurements (docs/BENCHMARKS.md says what each subcommand measures). Each measurement
// prints one JSON line on stdout and a human row on stderr.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <vector>

#include "bench/perf/benches.h"

int main(int argc, char** argv) {
  using namespace kvtrie::bench;
  CLI::App app{
      "kvtrie-bench: load, prefill, decode, multi-turn cache and copy measurements on a Vulkan device"};
  app.require_subcommand(1);
  CommonOptions common;
  // Each subcommand's repeat defaults, applied after parsing where its command line gave none (the
  // assignments in add_common only fix the default --help shows).
  struct Defaults {
    CLI::App* command;
    uint32_t repeats, warmup;
  };
  std::vector<Defaults> defaults;
  auto add_common = [&](CLI::App* sub, uint32_t repeats, uint32_t warmup) {
    common.repeats = repeats;
    common.warmup = warmup;
    defaults.push_back({sub, repeats, warmup});
    sub->add_option("--device", common.device, "Vulkan device index (-1: default choice)")
        ->capture_default_str();
    sub->add_option("--repeats", common.repeats, "timed repeats (median reported)")->capture_default_str();
    sub->add_option("--warmup", common.warmup, "untimed runs (decode: untimed steps) first")
        ->capture_default_str();
  };

  LoadOptions load;
  auto* load_cmd = app.add_subcommand("load", "GgufFile::open to GpuEngine ready (upload + pipelines)");
  load_cmd->add_option("--model", load.model, "GGUF model")->required()->check(CLI::ExistingFile);

  PrefillOptions prefill;
  auto* prefill_cmd = app.add_subcommand("prefill", "one sequence's prompt through GpuModel, tokens/s");
  prefill_cmd->add_option("--model", prefill.model, "GGUF model")->required()->check(CLI::ExistingFile);
  prefill_cmd->add_option("--prompt", prefill.prompt, "prompt tokens")->capture_default_str();
  prefill_cmd->add_option("--batch", prefill.max_batch_tokens, "max_batch_tokens (chunk size)")
      ->capture_default_str();
  prefill_cmd->add_flag("--profile", prefill.profile,
                        "after timing, the last chunk of one more run per dispatch: time by op");
  prefill_cmd->add_flag("--deterministic", prefill.deterministic,
                        "batch-invariant kernels (kvtrie serve --deterministic)");
  prefill_cmd
      ->add_option("--attention-split", prefill.attention_split,
                   "positions per attention split (0: the model's rules)")
      ->capture_default_str();
  prefill_cmd->add_flag(
      "--paged-decode", prefill.paged_decode,
      "under --deterministic, attention through attention.comp instead of attention_decode");
  prefill_cmd->add_flag("--coopmat2", prefill.coopmat2,
                        "large products through VK_NV_cooperative_matrix2 (matmul CoopMat2)");
  prefill_cmd->add_flag("--f32-x", prefill.f32_x,
                        "tensor-core tiles convert x themselves (no f16 copy of x)");
  prefill_cmd->add_option("--k-splits", prefill.k_splits, "split-K of tensor-core products (0: auto, 1: off)")
      ->capture_default_str();
  prefill_cmd->add_option("--tiles", prefill.tiles,
                          "tensor-core tiles of the f16-x products: qkv=T,o=T,gate_up=T,down=T or T for all "
                          "(T: SGMxSGNxTMxTNkBKbBUFFERS)");

  DecodeOptions decode;
  auto* decode_cmd =
      app.add_subcommand("decode", "one token per sequence per step, tokens/s and bandwidth bound");
  decode_cmd->add_option("--model", decode.model, "GGUF model")->required()->check(CLI::ExistingFile);
  decode_cmd->add_option("--context", decode.context, "KV tokens per sequence before decoding")
      ->capture_default_str();
  decode_cmd->add_option("--sequences", decode.sequences, "sequences decoding together")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  decode_cmd->add_option("--tokens", decode.tokens, "timed decode steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  decode_cmd->add_option("--read-bandwidth", decode.read_bandwidth, "device read bandwidth, bytes/s (bound)")
      ->capture_default_str();
  decode_cmd->add_flag(
      "--span", decode.span,
      "then as many steps again with a timestamp at each step's start and end (a decode_span "
      "row: the device's time on a step against the host's)");
  decode_cmd->add_flag("--profile", decode.profile,
                       "after timing, one step with a timestamp per dispatch: time by op");
  decode_cmd->add_flag("--shader-stats", decode.shader_stats,
                       "after timing, the driver's statistics (registers, ...) of every pipeline created");
  decode_cmd->add_flag("--deterministic", decode.deterministic,
                       "batch-invariant kernels (kvtrie serve --deterministic)");
  decode_cmd
      ->add_option("--attention-split", decode.attention_split,
                   "positions per attention split (0: the model's rules)")
      ->capture_default_str();
  decode_cmd->add_flag("--blocking-wait", decode.blocking_wait,
                       "forward() blocks on the step's fence at once instead of polling it first");
  decode_cmd->add_flag("--logits-copy", decode.logits_copy,
                       "the logits through device memory and a copy (the path before session 22)");
  decode_cmd
      ->add_option("--attention-key-lanes", decode.attention_key_lanes,
                   "lanes scoring each key in the decode pass (1, 2, 4; attention_decode's KEY_LANES; 0: by "
                   "split size)")
      ->capture_default_str();
  decode_cmd->add_flag("--greedy", decode.greedy,
                       "each step reads back its rows' argmax, taken on the GPU, instead of the logits");
  decode_cmd->add_flag("--ahead", decode.ahead,
                       "greedy steps, each submitted while the one before runs and fed its token on the GPU "
                       "(GpuModel::submit); the step time is the time between two steps' ends");
  decode_cmd->add_option("--logits-rows-per-lane", decode.logits_rows_per_lane,
                         "rows a lane of one-token steps' logits product (1 or 4; 0: its shape's)");
  decode_cmd->add_flag("--no-prefetch", decode.no_prefetch,
                       "no weights pulled into the L2 cache beside attention (default: the model's rule)");
  decode_cmd->add_flag("--prefetch-o", decode.prefetch_o,
                       "every decode step's attention pulls the o product's weights into the L2 cache");
  decode_cmd
      ->add_option("--prefetch-ffn-mib", decode.prefetch_ffn_mib,
                   "... and this many MiB of the gate and up products' first rows")
      ->capture_default_str();
  decode_cmd
      ->add_option("--prefetch-groups", decode.prefetch_groups, "work groups that prefetch (0: the kernel's)")
      ->capture_default_str();
  decode_cmd->add_flag("--paged-decode", decode.paged_decode,
                       "decode steps' attention (every batch's under --deterministic) through attention.comp "
                       "instead of attention_decode");
  decode_cmd->add_option("--k-splits", decode.k_splits, "split-K of tensor-core products (0: auto, 1: off)")
      ->capture_default_str();
  decode_cmd
      ->add_option("--q8-tokens", decode.q8_max_tokens,
                   "batches up to this many tokens on matvec_q8 (0: default)")
      ->capture_default_str();

  MultiturnOptions multi;
  auto* multi_cmd =
      app.add_subcommand("multiturn", "shared-prefix conversations through GpuEngine, cache on/off");
  multi_cmd->add_option("--model", multi.model, "GGUF model")->required()->check(CLI::ExistingFile);
  multi_cmd->add_option("--conversations", multi.conversations)
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  multi_cmd->add_option("--turns", multi.turns)->check(CLI::PositiveNumber)->capture_default_str();
  multi_cmd->add_option("--system", multi.system, "system prompt tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  multi_cmd->add_option("--user", multi.user, "user tokens per turn")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  multi_cmd->add_option("--answer", multi.answer, "answer tokens per turn")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  multi_cmd->add_option("--parallel", multi.parallel, "engine slots")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  multi_cmd->add_option("--kv-device-mib", multi.kv_device_mib, "device tier MiB (0: engine default)")
      ->capture_default_str();
  multi_cmd->add_option("--kv-host-mib", multi.kv_host_mib, "host tier MiB (0: engine default)")
      ->capture_default_str();
  bool no_baseline = false;
  multi_cmd->add_flag("--no-baseline", no_baseline, "skip the cache-off run");
  multi_cmd->add_option("--temperature", multi.temperature, "0: greedy; else with the sampler's defaults")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  multi_cmd
      ->add_option("--repeat-penalty", multi.repeat_penalty,
                   "over the last 64 tokens (Ollama's default 1.1); 1: none")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bool rows_only = false;
  multi_cmd->add_flag("--no-gpu-top-candidates", rows_only, "read every sampled row back whole");
  bool no_ahead = false;
  multi_cmd->add_flag("--no-ahead", no_ahead,
                      "every step waits for the one before (GpuEngineConfig::greedy_ahead)");

  SampleOptions sample;
  auto* sample_cmd =
      app.add_subcommand("sample", "Sampler::sample on one row of logits (CPU only), us a draw");
  sample_cmd->add_option("--vocab", sample.vocab)->check(CLI::PositiveNumber)->capture_default_str();
  sample_cmd->add_option("--draws", sample.draws, "draws a repeat")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  CopyOptions copy;
  auto* copy_cmd =
      app.add_subcommand("copy", "host<->device KV page copies (VkPageStore) vs one vkCmdCopyBuffer");
  copy_cmd->add_option("--pages", copy.pages)->check(CLI::PositiveNumber)->capture_default_str();
  copy_cmd->add_option("--batch", copy.batch, "pages per copy batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // The KV page shape (copy, promote, disk-read): llama3-8b by default, 2 MiB pages.
  auto add_page_shape = [](CLI::App* cmd, uint32_t& layers, uint32_t& kv_dim, uint32_t& page_tokens) {
    cmd->add_option("--layers", layers, "page shape: layers")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_option("--kv-dim", kv_dim, "page shape: n_kv_heads * head_dim")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_option("--page-tokens", page_tokens)->check(CLI::PositiveNumber)->capture_default_str();
  };
  add_page_shape(copy_cmd, copy.layers, copy.kv_dim, copy.page_tokens);

  PromoteOptions promote;
  auto* promote_cmd = app.add_subcommand(
      "promote", "a host-tier (and disk-tier) hit through KvCache + VkPageStore: promotion time and GB/s");
  promote_cmd->add_option("--pages", promote.pages, "the prompt's KV pages")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_page_shape(promote_cmd, promote.layers, promote.kv_dim, promote.page_tokens);
  promote_cmd->add_option("--commit-ahead-mib", promote.commit_ahead_mib, "0: the prompt's KV")
      ->capture_default_str();
  promote_cmd->add_option("--disk-dir", promote.disk_dir, "also a disk hit after a restart (scratch dir)");
  promote_cmd->add_option("--readers", promote.readers, "disk reads in flight")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  DiskReadOptions disk_read;
  auto* disk_read_cmd = app.add_subcommand(
      "disk-read",
      "disk tier page reads (DiskPageStore::load_run) vs a plain sequential read, per reader count");
  disk_read_cmd->add_option("--dir", disk_read.dir, "scratch directory on the disk to measure")->required();
  disk_read_cmd->add_option("--pages", disk_read.pages)->check(CLI::PositiveNumber)->capture_default_str();
  add_page_shape(disk_read_cmd, disk_read.layers, disk_read.kv_dim, disk_read.page_tokens);
  disk_read_cmd->add_option("--readers", disk_read.readers, "reads in flight, comma-separated")
      ->capture_default_str();
  disk_read_cmd->add_flag("--keep", disk_read.keep, "leave the page files");

  BandwidthOptions bw;
  auto* bw_cmd = app.add_subcommand("bandwidth", "device-local copy bandwidth (read + write)");
  bw_cmd->add_option("--mib", bw.mib, "buffer size")->check(CLI::PositiveNumber)->capture_default_str();
  bw_cmd->add_option("--unroll", bw.unrolls, "read_probe's loads in flight a thread (1, 2, 4, 8), each tried")
      ->delimiter(',')
      ->check(CLI::IsMember({1, 2, 4, 8}))
      ->capture_default_str();

  KernelOptions kernel;
  auto* kernel_cmd =
      app.add_subcommand("kernel", "one matrix product many times: per-dispatch time, weight GB/s");
  kernel_cmd->add_option("--type", kernel.type, "weight type (GGUF name, e.g. Q4_0)")->capture_default_str();
  kernel_cmd->add_option("--path", kernel.path, "auto, deterministic, tiled or coopmat")
      ->capture_default_str();
  kernel_cmd->add_option("--rows", kernel.rows)->check(CLI::PositiveNumber)->capture_default_str();
  kernel_cmd->add_option("--cols", kernel.cols)->check(CLI::PositiveNumber)->capture_default_str();
  kernel_cmd->add_option("--tokens", kernel.tokens)->check(CLI::PositiveNumber)->capture_default_str();
  kernel_cmd
      ->add_option("--sync-groups", kernel.sync_groups,
                   "work groups of the grid-sync probe, comma-separated (a GPU only: all must be resident)")
      ->capture_default_str();
  kernel_cmd->add_option("--dispatches", kernel.dispatches)
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();

  SweepMatvecOptions sweep;
  auto* sweep_cmd =
      app.add_subcommand("sweep-matvec", "decode products of a model's shapes: legacy vs matvec_q8 variants");
  sweep_cmd->add_option("--model", sweep.model, "shapes: llama3-8b or llama3-1b")->capture_default_str();
  sweep_cmd->add_option("--types", sweep.types, "weight types, comma-separated")->capture_default_str();
  sweep_cmd->add_option("--tokens", sweep.tokens, "token counts, comma-separated")->capture_default_str();
  sweep_cmd->add_option("--rows-per-lane", sweep.rows_per_lane, "matvec_q8 rows per lane, comma-separated")
      ->capture_default_str();
  sweep_cmd
      ->add_option("--threads-per-row", sweep.threads_per_row, "matvec_q8 threads per row lane (0: default)")
      ->capture_default_str();
  sweep_cmd
      ->add_option("--workgroups", sweep.workgroups,
                   "matvec_q8 work-group sizes, comma-separated (0: default)")
      ->capture_default_str();
  sweep_cmd
      ->add_option("--mode", sweep.mode,
                   "matvec_q8 fold for every shape: store, norm, acc, acc_qnorm, norm_swiglu")
      ->check(CLI::IsMember({"store", "norm", "acc", "acc_qnorm", "norm_swiglu"}));
  sweep_cmd->add_option("--shapes", sweep.shapes,
                        "qkv, o, gate_up, down, logits: comma-separated (default: all)");
  sweep_cmd->add_option("--variants", sweep.variants, "q8 (portable), q8i (integer dot), comma-separated")
      ->capture_default_str();
  sweep_cmd->add_option("--dispatches", sweep.dispatches)->check(CLI::Range(1, 1024))->capture_default_str();
  sweep_cmd->add_option(
      "--probe", sweep.probe,
      "bench's tuning build of matvec_q8i (nodot: loads without arithmetic; nox: x not loaded)");
  sweep_cmd->add_flag("--shader-stats", sweep.shader_stats,
                      "then the driver's statistics of every pipeline made (a shader_stats row each)");
  sweep_cmd->add_flag("--independent", sweep.independent,
                      "outputs of its own for every dispatch: no barriers between them (they overlap)");
  sweep_cmd->add_option("--rotate-mib", sweep.rotate_mib, "device memory the weight copies span")
      ->capture_default_str();

  SweepMatmulOptions sweep_mm;
  auto* sweep_mm_cmd =
      app.add_subcommand("sweep-matmul", "prefill products of a model's shapes per tensor-core tile");
  sweep_mm_cmd->add_option("--model", sweep_mm.model, "shapes: llama3-8b or llama3-1b")
      ->capture_default_str();
  sweep_mm_cmd->add_option("--types", sweep_mm.types, "weight types, comma-separated")->capture_default_str();
  sweep_mm_cmd->add_option("--tokens", sweep_mm.tokens, "prompt tokens per product, comma-separated")
      ->capture_default_str();
  sweep_mm_cmd->add_option("--extensions", sweep_mm.extensions, "NV, KHR, KHR-xh, CM2, KHR-noload, KHR-nomul")
      ->capture_default_str();
  sweep_mm_cmd
      ->add_option("--cm2-tiles", sweep_mm.cm2_tiles, "CM2 tiles THREADSxROWSxTOKENSkBK, comma-separated")
      ->capture_default_str();
  sweep_mm_cmd->add_option("--tiles", sweep_mm.tiles, "tiles SGMxSGNxTMxTN, comma-separated")
      ->capture_default_str();
  sweep_mm_cmd
      ->add_option("--k-splits", sweep_mm.k_splits, "split-K counts, comma-separated (1: none, 0: auto)")
      ->capture_default_str();
  sweep_mm_cmd->add_option("--dispatches", sweep_mm.dispatches)
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();

  SweepAttentionOptions sweep_at;
  auto* sweep_at_cmd = app.add_subcommand(
      "sweep-attention", "decode attention of a model's shape per context, batch and split size");
  sweep_at_cmd->add_option("--model", sweep_at.model, "shapes: llama3-8b or llama3-1b")
      ->capture_default_str();
  sweep_at_cmd->add_option("--contexts", sweep_at.contexts, "tokens of KV per sequence, comma-separated")
      ->capture_default_str();
  sweep_at_cmd->add_option("--sequences", sweep_at.sequences, "sequences decoding, comma-separated")
      ->capture_default_str();
  sweep_at_cmd->add_option("--splits", sweep_at.splits, "positions per split, comma-separated")
      ->capture_default_str();
  sweep_at_cmd
      ->add_option(
          "--variants", sweep_at.variants,
          "split-pass builds: paged, probe1..probe5 (without scores, softmax, K/V loads, PV, all four); "
          "decode (the engine's decode pass), decode_probe1/2/5, decode_vk4, decode_p4, decode_kl2, "
          "decode_kl4, decode_p16_kl1/2/4, decode_p16vk4_kl1/2/4")
      ->capture_default_str();
  sweep_at_cmd->add_option("--evict-mib", sweep_at.evict_mib, "device memory read between layers (0: none)")
      ->capture_default_str();
  sweep_at_cmd->add_flag("--merge-in-pass", sweep_at.merge_in_pass,
                         "decode variants: the last split merges the splits, as decode steps run it");

  // Per-subcommand repeat defaults: loads are slow, decode times each step (--tokens) and warms up steps.
  add_common(load_cmd, 3, 0);
  add_common(prefill_cmd, 5, 1);
  add_common(decode_cmd, 1, 3);
  add_common(multi_cmd, 1, 0);
  add_common(sample_cmd, 5, 1);
  add_common(copy_cmd, 5, 1);
  add_common(promote_cmd, 3, 0);
  add_common(disk_read_cmd, 3, 0);
  add_common(bw_cmd, 10, 2);
  add_common(kernel_cmd, 5, 1);
  add_common(sweep_cmd, 5, 1);
  add_common(sweep_mm_cmd, 3, 1);
  add_common(sweep_at_cmd, 5, 1);
  common.repeats = 0;
  common.warmup = 0;
  CLI11_PARSE(app, argc, argv);
  for (const Defaults& d : defaults) {
    if (!d.command->parsed()) continue;
    if (d.command->count("--repeats") == 0) common.repeats = d.repeats;
    if (d.command->count("--warmup") == 0) common.warmup = d.warmup;
  }
  if (common.repeats == 0) common.repeats = 1;
  multi.baseline = !no_baseline;
  multi.gpu_top_candidates = !rows_only;
  multi.greedy_ahead = !no_ahead;

  try {
    // stdout carries only the JSON lines: the engine's log lines go to stderr with the human rows.
    spdlog::set_default_logger(spdlog::stderr_color_mt("kvtrie-bench"));
    if (load_cmd->parsed()) run_load(common, load);
    if (prefill_cmd->parsed()) run_prefill(common, prefill);
    if (decode_cmd->parsed()) run_decode(common, decode);
    if (multi_cmd->parsed()) run_multiturn(common, multi);
    if (sample_cmd->parsed()) run_sample(common, sample);
    if (copy_cmd->parsed()) run_copy(common, copy);
    if (promote_cmd->parsed()) run_promote(common, promote);
    if (disk_read_cmd->parsed()) run_disk_read(common, disk_read);
    if (bw_cmd->parsed()) run_bandwidth(common, bw);
    if (kernel_cmd->parsed()) run_kernel(common, kernel);
    if (sweep_cmd->parsed()) run_sweep_matvec(common, sweep);
    if (sweep_mm_cmd->parsed()) run_sweep_matmul(common, sweep_mm);
    if (sweep_at_cmd->parsed()) run_sweep_attention(common, sweep_at);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtrie-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
