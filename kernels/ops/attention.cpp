#include "kernels/ops/attention.h"

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "base/error.h"
#include "kernels/ops/matmul.h"

namespace kvtrie::kernels {

namespace {

struct PagedPush {
  uint32_t n_heads, n_kv_heads, head_dim, page_size, n_layers, layer, chunk, max_splits, q_stride;
  float scale;
  uint32_t pages_per_binding, heads_per_wg, block_tokens, tile_keys, row_stride4;
};
// attention_coopmat's: the split pass's, then where a single split writes the output.
struct CoopmatPush {
  PagedPush paged;
  uint32_t out_stride;
  uint32_t out_mode;  // 0: partials; one split: the output, 1 f32, 2 f16
};
struct CombinePush {
  uint32_t n_heads, head_dim, chunk, max_splits, out_stride, q_stride;
};

// attention.comp's shared arrays: qs4 holds rows_cap * head_dim floats, kvs one tile of
// tile_keys * (head_dim / 2 + 1) words, ps4 tile_keys * rows_cap floats.
constexpr uint32_t kQFloats = 2048, kTileWords = 2080, kScoreFloats = 512, kMaxRows = 32;
constexpr uint32_t kSharedBytes = (kQFloats + kTileWords + kScoreFloats + kMaxRows * 2) * 4 + 8;
constexpr uint32_t kFetchRegs = 2;  // attention.comp's FETCH_REGS: 16-byte pieces of a tile per thread

// Query rows (token, head) per work group: a multiple of 4, with q of all rows in qs4 and a tile's scores in
// ps4 (16 at head_dim 128: 4 tokens of llama3's 4 query heads per KV head). Shared memory is kept near
// 18 KiB: on an H200 the work groups resident per SM, not the arithmetic, bound this kernel (29 KiB ran
// 1.7-2x slower).
uint32_t rows_cap(uint32_t head_dim) {
  return std::min({kMaxRows, kScoreFloats / 32, kQFloats / head_dim / 4 * 4});  // 32: the largest tile
}

// Keys per tile. A function of head_dim alone: tile boundaries are part of a row's arithmetic (the online
// softmax rescales at each), so they must not depend on the batch.
uint32_t tile_keys(uint32_t head_dim) {
  return std::min(32u, kTileWords / (head_dim / 2 + 1) / 4 * 4);
}

// attention_coopmat.comp's builds (variants.cmake), one per head_dim, each with the subgroups a work group
// that measured fastest for it, 16 rows (heads x tokens) a subgroup. On an H100, prefill of 4096 tokens:
// llama3-8b (head_dim 128) spent 19.6 ms in attention in its last 512-token chunk with 8 subgroups against
// 28.5 with 4; llama3-1b (64) 7.0 ms with 4 against 7.7 with 8.
struct CoopmatBuild {
  uint32_t head_dim;
  std::string_view variant;
  uint32_t rows;
};
constexpr CoopmatBuild kCoopmatBuilds[] = {{64, "d64", 64}, {128, "d128", 128}};

const CoopmatBuild* coopmat_build(uint32_t head_dim) {
  for (const CoopmatBuild& b : kCoopmatBuilds)
    if (b.head_dim == head_dim) return &b;
  return nullptr;
}

// Both passes' work-group size.
vk::SpecConstants spec_attention(const vk::Device& d) {
  return {attention_workgroup_size(d)};
}
// attention.comp (the split pass) and attention_combine.comp's builds, indices of kVariants.
enum Variant : uint32_t { kPaged, kCombine, kCombineQout, kCombineF16 };
constexpr std::string_view kVariants[] = {"paged", "combine", "combine_qout", "combine_f16"};
constexpr OpRegistration kAttention{.op = "attention", .variants = kVariants, .spec = spec_attention};
// The tensor-core split pass: one variant per build of kCoopmatBuilds (their index), on the KHR path.
constexpr auto kCoopmatVariants = [] {
  std::array<std::string_view, std::size(kCoopmatBuilds)> names{};
  for (size_t i = 0; i < names.size(); ++i) names[i] = kCoopmatBuilds[i].variant;
  return names;
}();
constexpr OpRegistration kAttentionCoopmat{.op = "attention_coopmat",
                                           .variants = kCoopmatVariants,
                                           .spec = spec_none,
                                           .available = coopmat_khr_path};

// attention_decode.comp: kDecodeParts subgroups of 4 to 32 lanes a work group (each walks its own key
// blocks), up to kDecodeRows query heads of one KV head and kDecodeRowFloats rows x head_dim (its shared
// arrays). Builds for 32-lane subgroups at head_dim 64 and 128 (dimension quads a lane fixed), and one for
// the rest.
constexpr uint32_t kDecodeParts = 8, kDecodeRows = 4, kDecodeRowFloats = 512, kDecodeMaxQuads = 8;
bool decode_subgroups(const vk::Device& d) {
  const uint32_t sg = d.info().subgroup_size;
  return d.info().subgroup_arithmetic && d.info().subgroup_vote && sg >= 4 && sg <= 32;
}
bool decode_subgroups_32(const vk::Device& d) {
  return decode_subgroups(d) && d.info().subgroup_size == 32;
}
vk::SpecConstants spec_decode(const vk::Device& d) {
  return {kDecodeParts * d.info().subgroup_size};
}
constexpr std::string_view kDecode32Variants[] = {"d64", "d128"};
constexpr std::string_view kDecodeAnyVariants[] = {"any"};
constexpr OpRegistration kAttentionDecode32{.op = "attention_decode_sg32",
                                            .variants = kDecode32Variants,
                                            .spec = spec_decode,
                                            .available = decode_subgroups_32,
                                            .shader = "attention_decode"};
constexpr OpRegistration kAttentionDecodeAny{.op = "attention_decode",
                                             .variants = kDecodeAnyVariants,
                                             .spec = spec_decode,
                                             .available = decode_subgroups};
// The same builds with 2 or 4 lanes a key (AttentionArgs::decode_key_lanes). Short splits take 2
// (attention_decode_key_lanes), so those are registered and prewarmed; 4, a tuning knob, is made when a run
// asks for it.
template <uint32_t KeyLanes>
vk::SpecConstants spec_decode_key_lanes(const vk::Device& d) {
  return {kDecodeParts * d.info().subgroup_size, KeyLanes};
}
constexpr OpRegistration kAttentionDecode32Kl2{.op = "attention_decode_sg32_kl2",
                                               .variants = kDecode32Variants,
                                               .spec = spec_decode_key_lanes<2>,
                                               .available = decode_subgroups_32,
                                               .shader = "attention_decode"};
constexpr OpRegistration kAttentionDecode32Kl4{.op = "attention_decode_sg32_kl4",
                                               .variants = kDecode32Variants,
                                               .spec = spec_decode_key_lanes<4>,
                                               .shader = "attention_decode"};
constexpr OpRegistration kAttentionDecodeAnyKl2{.op = "attention_decode_kl2",
                                                .variants = kDecodeAnyVariants,
                                                .spec = spec_decode_key_lanes<2>,
                                                .available = decode_subgroups,
                                                .shader = "attention_decode"};
constexpr OpRegistration kAttentionDecodeAnyKl4{.op = "attention_decode_kl4",
                                                .variants = kDecodeAnyVariants,
                                                .spec = spec_decode_key_lanes<4>,
                                                .shader = "attention_decode"};

// attention_decode's push constants: the split pass's, then the output (out_mode 0: partials; the output
// itself: 1 f32, 2 f16, 3 f32 and quantized), and whether the last split merges them all (fused).
struct DecodePush {
  PagedPush paged;
  uint32_t out_stride, out_mode, q_out_stride, fused;
};

}  // namespace

bool attention_uses_decode_pass(const vk::Device& device, const AttentionArgs& args) {
  return args.decode && !attention_uses_tensor_cores(device, args) && decode_subgroups(device) &&
         args.head_dim % 8 == 0 && args.head_dim / 4 <= kDecodeMaxQuads * device.info().subgroup_size;
}

bool attention_uses_tensor_cores(const vk::Device& device, const AttentionArgs& args) {
  const uint32_t q_stride = args.q_stride ? args.q_stride : args.n_heads * args.head_dim;
  return args.tensor_cores && coopmat_khr_path(device) && coopmat_build(args.head_dim) != nullptr &&
         q_stride % 4 == 0 && args.q.offset % 16 == 0;
}

uint32_t attention_workgroup_size(const vk::Device&) {
  // attention.comp gives each thread one (4 rows x 2 dims) accumulator unit of a work group (rows x head_dim
  // <= 2048): 256 threads (attention() checks that the device allows them). No subgroup operation is used,
  // so any subgroup size works.
  return 256;
}

// attention_decode.comp's position_split.
constexpr uint32_t kPositionSplitMin = 128, kPositionSplitMax = 512, kPositionSplitOf = 8;

uint32_t attention_position_split(uint32_t position) {
  return std::clamp(std::bit_floor(std::max(position / kPositionSplitOf, 1u)), kPositionSplitMin,
                    kPositionSplitMax);
}

uint32_t attention_max_splits(uint32_t max_position, uint32_t split_size) {
  if (split_size > 0) return max_position / split_size + 1;
  // A token's splits grow with its position but for the drop where its split doubles, just past each power
  // of two: the most come at max_position or just below one of those.
  uint32_t most = 0;
  for (uint64_t end = 1; end <= uint64_t{max_position} * 2 + 1; end *= 2) {
    const auto p = static_cast<uint32_t>(std::min<uint64_t>(end - 1, max_position));
    most = std::max(most, p / attention_position_split(p) + 1);
  }
  return most;
}

uint32_t attention_decode_key_lanes(const vk::Device& device, uint32_t split_size, uint32_t head_dim) {
  // On an H100 (session 23, llama3-8b Q4_0, one sequence): 2 lanes a key took a 128-position split from 14.5
  // to 12.8 us (decode 384 -> 392 tok/s at 512) and a 512-position split from 24.5 to 26.3 (342 -> 334 at
  // 4096); 4 lanes lost to 2 at every split but 64.
  const bool short_split = split_size > 0 && split_size < kDecodeParts * device.info().subgroup_size;
  return short_split && head_dim % 16 == 0 ? 2 : 1;
}

uint64_t attention_scratch_bytes(const AttentionArgs& args) {
  return uint64_t{args.tokens} * args.n_heads * attention_max_splits(args.max_position, args.split_size) *
         (args.head_dim + 2) * sizeof(float);
}

namespace {
void record_attention(vk::CommandRecorder& rec, const Kernels& k, const AttentionArgs& args,
                      const vk::ComputePipeline* split_pass) {
  KVTRIE_CHECK(args.n_kv_heads > 0 && args.n_heads % args.n_kv_heads == 0,
               "attention: n_heads must be a multiple of n_kv_heads");
  KVTRIE_CHECK(args.head_dim > 0 && args.head_dim <= 256 && args.head_dim % 2 == 0,
               "attention: head_dim must be even and at most 256");
  KVTRIE_CHECK(args.layout.kv_dim == args.n_kv_heads * args.head_dim,
               "attention: layout.kv_dim != n_kv_heads * head_dim");
  KVTRIE_CHECK(args.layout.page_tokens > 0 && args.layer < args.layout.n_layers,
               "attention: bad page geometry");
  KVTRIE_CHECK(args.scratch.range >= attention_scratch_bytes(args), "attention: scratch is too small");
  KVTRIE_CHECK(args.split_size > 0 || attention_uses_decode_pass(k.device(), args),
               "attention: split_size 0 (each token's own) takes the decode pass");
  if (args.tokens == 0) return;
  const uint32_t hd = args.head_dim;
  const uint32_t splits = attention_max_splits(args.max_position, args.split_size);
  const uint32_t width = args.n_heads * hd;
  const float scale = args.scale != 0 ? args.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  KVTRIE_CHECK(splits <= 65535 && args.tokens <= 65535 && args.n_heads <= 65535, "attention: grid too large");
  KVTRIE_CHECK(k.device().info().max_shared_memory >= kSharedBytes,
               "attention: the device has too little shared memory");
  KVTRIE_CHECK(k.workgroup_size(kAttention) == 256 && k.device().info().max_workgroup_invocations >= 256 &&
                   k.device().info().max_workgroup_size_x >= 256,
               "attention: attention.comp needs 256 threads per work group");

  // GQA sharing and query blocks: a work group takes heads_per_wg query heads of one KV head and up to
  // block_tokens tokens of one sequence (rows = heads x tokens <= rows_cap, or the tensor-core build's rows).
  const CoopmatBuild* coopmat = attention_uses_tensor_cores(k.device(), args) ? coopmat_build(hd) : nullptr;
  const uint32_t group_heads = args.n_heads / args.n_kv_heads;
  const uint32_t rows = coopmat ? coopmat->rows : rows_cap(hd);
  const uint32_t heads_per_wg = std::min(group_heads, rows);
  const uint32_t head_groups = (group_heads + heads_per_wg - 1) / heads_per_wg;
  const uint32_t block_tokens = std::max(1u, rows / heads_per_wg);
  const uint32_t keys = tile_keys(hd);
  KVTRIE_CHECK(coopmat || (rows * hd <= kQFloats && keys * (hd / 2 + 1) <= kTileWords &&
                           keys * rows <= kScoreFloats && keys % 4 == 0 && keys > 0),
               "attention: tile sizes exceed attention.comp's shared arrays");
  // attention.comp loads a tile of 16-byte row pieces (head_dim a multiple of 8) in kFetchRegs a thread.
  KVTRIE_CHECK(coopmat || hd % 8 != 0 || keys * (hd / 8) <= kFetchRegs * 256,
               "attention: a K/V tile exceeds attention.comp's registers per thread");
  KVTRIE_CHECK(uint64_t{args.n_kv_heads} * head_groups <= 65535, "attention: grid too large");

  // Pool bindings: kv_pages, then the extra chunks; unused slots repeat kv_pages (never read).
  vk::BufferView pools[4] = {args.kv_pages, args.kv_pages, args.kv_pages, args.kv_pages};
  uint32_t per_binding = args.pages_per_binding;
  if (per_binding == 0) {
    per_binding = UINT32_MAX / 2;  // everything in binding 0
  } else {
    for (size_t i = 0; i < args.kv_pages_more.size(); ++i)
      if (!args.kv_pages_more[i].empty()) pools[i + 1] = args.kv_pages_more[i];
  }
  for (const vk::BufferView& p : pools)
    KVTRIE_CHECK(p.range < (uint64_t{1} << 32), "attention: a pool binding must stay below 4 GiB");
  const PagedPush paged{args.n_heads,
                        args.n_kv_heads,
                        hd,
                        args.layout.page_tokens,
                        args.layout.n_layers,
                        args.layer,
                        args.split_size,
                        splits,
                        args.q_stride ? args.q_stride : width,
                        scale,
                        per_binding,
                        heads_per_wg,
                        block_tokens,
                        keys,
                        rows / 4};
  const vk::Binding split_bindings[] = {
      vk::read(args.q),          vk::read(pools[0]),      vk::read(pools[1]),
      vk::read(pools[2]),        vk::read(pools[3]),      vk::read(args.page_table),
      vk::read(args.token_info), vk::write(args.scratch), vk::write(args.out)};
  const uint32_t out_stride = args.out_stride ? args.out_stride : width;
  KVTRIE_CHECK(!args.half_out || (!args.quantized_out && hd % 2 == 0 && out_stride % 2 == 0),
               "attention: an f16 output takes pairs of values and no quantized output");
  if (attention_uses_decode_pass(k.device(), args)) {
    // Up to kDecodeRows heads a work group, within the shared rows; one split writes the output itself.
    const uint32_t decode_heads = std::min({group_heads, kDecodeRows, kDecodeRowFloats / hd});
    const uint32_t decode_groups = (group_heads + decode_heads - 1) / decode_heads;
    KVTRIE_CHECK(uint64_t{args.n_kv_heads} * decode_groups <= 65535, "attention: grid too large");
    KVTRIE_CHECK(k.workgroup_size(kAttentionDecodeAny) == kDecodeParts * k.device().info().subgroup_size &&
                     k.device().info().max_workgroup_invocations >= k.workgroup_size(kAttentionDecodeAny),
                 "attention: attention_decode needs 8 subgroups a work group");
    // One split, or several merged by the last to finish (split_counters): the pass writes the output.
    const bool fused = splits > 1 && !args.split_counters.empty();
    KVTRIE_CHECK(
        !fused || args.split_counters.range >= uint64_t{args.tokens} * args.n_kv_heads * decode_groups * 4,
        "attention: split_counters needs a word per token, KV head and head group");
    const bool whole = splits == 1 || fused;
    KVTRIE_CHECK(whole || args.split_size > 0,
                 "attention: split_size 0 needs split_counters (the combine pass splits by split_size)");
    DecodePush push{paged, out_stride, 0, args.quantized_out ? args.quantized_out->stride : 0,
                    fused ? 1u : 0u};
    push.paged.heads_per_wg = decode_heads;
    if (whole) push.out_mode = args.quantized_out ? 3u : args.half_out ? 2u : 1u;
    vk::BufferView qout_bytes = args.scratch, qout_scales = args.scratch;  // unused unless out_mode 3
    if (args.quantized_out) {
      KVTRIE_CHECK(
          hd % 16 == 0 && args.quantized_out->stride % 16 == 0 && args.quantized_out->stride >= width,
          "attention: a quantized output needs head_dim a multiple of 16 and a stride of whole rows");
      qout_bytes = args.quantized_out->bytes;
      qout_scales = args.quantized_out->scales;
    }
    const vk::Binding bindings[] = {
        vk::read(args.q),          vk::read(pools[0]),
        vk::read(pools[1]),        vk::read(pools[2]),
        vk::read(pools[3]),        vk::read(args.page_table),
        vk::read(args.token_info), vk::write(args.scratch),
        vk::write(args.out),       vk::write(qout_bytes),
        vk::write(qout_scales),    vk::write(fused ? args.split_counters : args.scratch)};
    const bool fixed = decode_subgroups_32(k.device()) && (hd == 64 || hd == 128);
    const uint32_t kl = args.decode_key_lanes ? args.decode_key_lanes
                                              : attention_decode_key_lanes(k.device(), args.split_size, hd);
    KVTRIE_CHECK(
        (kl == 1 || kl == 2 || kl == 4) && hd % (8 * kl) == 0 && kl <= k.device().info().subgroup_size,
        "attention: decode_key_lanes is 1, 2 or 4, dividing head_dim / 8, at most the subgroup size");
    const OpRegistration& decode_row = fixed ? (kl == 1   ? kAttentionDecode32
                                                : kl == 2 ? kAttentionDecode32Kl2
                                                          : kAttentionDecode32Kl4)
                                             : (kl == 1   ? kAttentionDecodeAny
                                                : kl == 2 ? kAttentionDecodeAnyKl2
                                                          : kAttentionDecodeAnyKl4);
    rec.dispatch(split_pass ? *split_pass : k.pipeline(decode_row, fixed && hd == 128 ? 1 : 0),
                 std::span<const vk::Binding>(bindings), push, splits, args.n_kv_heads * decode_groups,
                 args.tokens);
    if (whole) return;
  } else if (coopmat) {
    // One split: attention_coopmat writes the output itself (f32 or f16), and no combine pass runs.
    const bool whole = splits == 1 && !args.quantized_out;
    rec.dispatch(k.pipeline(kAttentionCoopmat, static_cast<uint32_t>(coopmat - std::begin(kCoopmatBuilds))),
                 std::span<const vk::Binding>(split_bindings),
                 CoopmatPush{paged, out_stride, whole ? (args.half_out ? 2u : 1u) : 0u}, splits,
                 args.n_kv_heads * head_groups, args.tokens);
    if (whole) return;
  } else {
    rec.dispatch(split_pass ? *split_pass : k.pipeline(kAttention, kPaged),
                 std::span<const vk::Binding>(split_bindings, 8), paged, splits,
                 args.n_kv_heads * head_groups, args.tokens);
  }

  const CombinePush combine{args.n_heads, hd,         args.split_size,
                            splits,       out_stride, args.quantized_out ? args.quantized_out->stride : 0};
  if (const std::optional<QuantizedX>& q = args.quantized_out) {
    KVTRIE_CHECK(hd % 16 == 0 && q->stride % 16 == 0 && q->stride >= width,
                 "attention: a quantized output needs head_dim a multiple of 16 and a stride of whole rows");
    rec.dispatch(k.pipeline(kAttention, kCombineQout),
                 {vk::read(args.scratch), vk::read(args.token_info), vk::write(args.out), vk::write(q->bytes),
                  vk::write(q->scales)},
                 combine, args.n_heads, args.tokens);
  } else {
    rec.dispatch(k.pipeline(kAttention, args.half_out ? kCombineF16 : kCombine),
                 {vk::read(args.scratch), vk::read(args.token_info), vk::write(args.out)}, combine,
                 args.n_heads, args.tokens);
  }
}

}  // namespace

void attention(vk::CommandRecorder& rec, const Kernels& k, const AttentionArgs& args) {
  record_attention(rec, k, args, nullptr);
}

void attention(vk::CommandRecorder& rec, const Kernels& k, const AttentionArgs& args,
               const vk::ComputePipeline& split_pass) {
  KVTRIE_CHECK(!attention_uses_tensor_cores(k.device(), args),
               "attention: a split-pass build is scalar only");
  record_attention(rec, k, args, &split_pass);
}

KVTRIE_REGISTER_OPS(attention, &kAttention, &kAttentionCoopmat, &kAttentionDecode32, &kAttentionDecodeAny,
                    &kAttentionDecode32Kl2, &kAttentionDecodeAnyKl2);

}  // namespace kvtrie::kernels
