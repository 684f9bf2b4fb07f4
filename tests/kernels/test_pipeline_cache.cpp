// The pipeline cache on disk and in the background: the cache file round-trips (a second PipelineCache of
// the same device starts from it); a corrupt or truncated file and a file made for another identity are
// ignored (and replaced by a good one); the directory follows the environment and can be turned off;
// background creation adopts every pipeline of a batch and rethrows a failure; Kernels' prewarm for a
// model's weight types takes every type-independent variant and only those types' (plus f32) variants of
// the rows indexed by weight type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/ops/kernels.h"
#include "kernels/ops/matvec_q8.h"
#include "kernels/vk/context.h"
#include "kernels/vk/pipeline.h"
#include "kernels/vk/pipeline_cache_file.h"
#include "kernels/vk/pipeline_statistics.h"
#include "kernels/vk/shader_registry.h"
#include "tests/support/paths.h"
#include "tests/support/vk_fixture.h"

namespace kvtrie::vk {
namespace {

using test::VulkanTest;

class PipelineCacheDisk : public VulkanTest {
 protected:
  void SetUp() override {
    VulkanTest::SetUp();
    dir_ = test::scratch_dir() / "pipelines";
    std::filesystem::remove_all(dir_);
  }
  const std::filesystem::path& dir() const { return dir_; }
  // A few real pipelines (cheap ones) created in `cache`.
  static void create_some(PipelineCache& cache) {
    cache.get("fill_f32", {64});
    cache.get("add_f32", {64});
  }
  static std::vector<char> bytes_of(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write_bytes(const std::filesystem::path& file, const std::vector<char>& bytes) {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::filesystem::path dir_;
};

TEST_F(PipelineCacheDisk, FileRoundTripsBetweenCaches) {
  std::filesystem::path file;
  {
    PipelineCache first(context().device(), dir());
    ASSERT_TRUE(first.file());
    file = *first.file();
    EXPECT_EQ(file.parent_path(), dir());
    EXPECT_EQ(first.stats().file_status, CacheFileStatus::Absent);
    create_some(first);
    ASSERT_TRUE(first.save());
    EXPECT_EQ(first.stats().files_written, 1u);
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  const CacheFileContents read = read_pipeline_cache_file(file, pipeline_cache_identity(context().device()));
  ASSERT_EQ(read.status, CacheFileStatus::Loaded) << read.reason;
  EXPECT_GT(read.data.size(), 0u);

  PipelineCache second(context().device(), dir());
  EXPECT_EQ(second.stats().file_status, CacheFileStatus::Loaded);
  EXPECT_EQ(second.stats().file_bytes_loaded, read.data.size());
  create_some(second);
  EXPECT_EQ(second.size(), 2u);
  // Nothing new since it was read: the file is not rewritten.
  EXPECT_TRUE(second.save());
  EXPECT_EQ(second.stats().files_written, 0u);
  // No temporary files are left beside it.
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir())) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u);
}

TEST_F(PipelineCacheDisk, CorruptOrTruncatedFilesAreIgnoredAndReplaced) {
  std::filesystem::path file;
  {
    PipelineCache cache(context().device(), dir());
    create_some(cache);
    ASSERT_TRUE(cache.save());
    file = *cache.file();
  }
  const std::vector<char> good = bytes_of(file);
  ASSERT_GT(good.size(), 60u);
  std::vector<char> flipped = good;
  flipped.back() = static_cast<char>(flipped.back() ^ 0x5a);
  const std::vector<char> truncated(good.begin(), good.end() - 1);
  const std::vector<char> garbage(100, 'x');
  const std::vector<char> empty;
  for (const auto& [name, bytes] : {std::pair{"flipped", flipped}, std::pair{"truncated", truncated},
                                    std::pair{"garbage", garbage}, std::pair{"empty", empty}}) {
    SCOPED_TRACE(name);
    write_bytes(file, bytes);
    PipelineCache cache(context().device(), dir());
    EXPECT_EQ(cache.stats().file_status, CacheFileStatus::Corrupt);
    EXPECT_EQ(cache.stats().file_bytes_loaded, 0u);
    create_some(cache);  // still works, from an empty cache
    ASSERT_TRUE(cache.save());
    EXPECT_EQ(read_pipeline_cache_file(file, pipeline_cache_identity(context().device())).status,
              CacheFileStatus::Loaded)
        << "the bad file is replaced by a good one";
  }
}

TEST_F(PipelineCacheDisk, AFileOfAnotherDriverOrBuildIsIgnored) {
  const PipelineCacheIdentity id = pipeline_cache_identity(context().device());
  EXPECT_EQ(id.build_hash, embedded_spirv_hash());
  const std::filesystem::path file = dir() / pipeline_cache_file_name(id);
  const std::vector<std::byte> data(64, std::byte{7});
  for (int field = 0; field < 4; ++field) {
    SCOPED_TRACE("field " + std::to_string(field));
    PipelineCacheIdentity other = id;
    if (field == 0) other.driver_version += 1;
    if (field == 1) other.device_id ^= 1;
    if (field == 2) other.cache_uuid[5] ^= 0x10;
    if (field == 3) other.build_hash += 1;
    EXPECT_NE(pipeline_cache_file_name(other), pipeline_cache_file_name(id));
    // Written under this identity's file name, but with the other identity in its header.
    ASSERT_EQ(write_pipeline_cache_file(file, other, data), std::nullopt);
    EXPECT_EQ(read_pipeline_cache_file(file, other).status, CacheFileStatus::Loaded);
    EXPECT_EQ(read_pipeline_cache_file(file, id).status, CacheFileStatus::Mismatched);
    PipelineCache cache(context().device(), dir());
    EXPECT_EQ(cache.stats().file_status, CacheFileStatus::Mismatched);
    EXPECT_EQ(cache.stats().file_bytes_loaded, 0u);
  }
  EXPECT_EQ(read_pipeline_cache_file(dir() / "absent.bin", id).status, CacheFileStatus::Absent);
}

// Sets an environment variable for one scope and restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(PipelineCacheDir, FollowsTheEnvironmentAndCanBeTurnedOff) {
  {
    ScopedEnv dir("KVTRIE_PIPELINE_CACHE_DIR", "/tmp/somewhere");
    EXPECT_EQ(pipeline_cache_dir(), std::filesystem::path("/tmp/somewhere"));
  }
  for (const char* off : {"off", "0", ""}) {
    ScopedEnv dir("KVTRIE_PIPELINE_CACHE_DIR", off);
    EXPECT_EQ(pipeline_cache_dir(), std::nullopt) << "'" << off << "'";
  }
  ScopedEnv dir("KVTRIE_PIPELINE_CACHE_DIR", nullptr);
  {
    ScopedEnv xdg("XDG_CACHE_HOME", "/x/cache");
    EXPECT_EQ(pipeline_cache_dir(), std::filesystem::path("/x/cache/kvtrie"));
  }
  ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  {
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(pipeline_cache_dir(), std::filesystem::path("/home/someone/.cache/kvtrie"));
  }
  ScopedEnv home("HOME", nullptr);
  EXPECT_EQ(pipeline_cache_dir(), std::nullopt);
}

class PipelineCacheBackground : public VulkanTest {};

TEST_F(PipelineCacheBackground, ABatchIsAdoptedWholeAndAFailureIsRethrown) {
  PipelineCache cache(context().device());
  cache.get("fill_f32", {32});  // already present: not created again
  cache.create_in_background(
      {{"fill_f32", {32}}, {"add_f32", {32}}, {"swiglu_f32", {32}}, {"rope_f32", {32}}}, 3);
  EXPECT_TRUE(cache.background_pending());
  cache.finish_background();
  EXPECT_FALSE(cache.background_pending());
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.stats().created, 4u);
  EXPECT_EQ(cache.stats().background_created, 3u);
  EXPECT_TRUE(cache.contains("rope_f32", {32}));

  cache.create_in_background({{"no_such_variant", {}}, {"add_bias_f32", {32}}}, 2);
  EXPECT_THROW(cache.finish_background(), Error);
  EXPECT_TRUE(cache.contains("add_bias_f32", {32})) << "the good pipelines of a failed batch are kept";
  EXPECT_FALSE(cache.background_pending());

  // get() waits for a pending batch instead of creating a second copy.
  cache.create_in_background({{"kv_write_f16", {32}}});
  const ComputePipeline& p = cache.get("kv_write_f16", {32});
  EXPECT_EQ(p.name(), "kv_write_f16");
  EXPECT_EQ(cache.stats().background_created, 5u);
}

TEST_F(PipelineCacheBackground, DestroyingACacheWithABatchInFlightJoinsIt) {
  PipelineCache cache(context().device());
  cache.create_in_background({{"fill_f32", {32}}, {"add_f32", {32}}}, 2);
}  // no leak, no crash: the fixture checks validation messages and allocations

}  // namespace
}  // namespace kvtrie::vk

namespace kvtrie::kernels {
namespace {

std::vector<std::string> names(const std::vector<vk::PipelineKey>& keys) {
  std::vector<std::string> out;
  for (const vk::PipelineKey& k : keys) out.push_back(k.variant);
  return out;
}
bool has(const std::vector<std::string>& v, const std::string& name) {
  return std::find(v.begin(), v.end(), name) != v.end();
}

// A registered row by its op's name.
const OpRegistration& row(std::string_view op) {
  for (const OpRegistration* r : registered_ops())
    if (r->op == op) return *r;
  throw Error("no registered op " + std::string(op));
}

class KernelsPrewarm : public test::VulkanTest {};

TEST_F(KernelsPrewarm, AModelsTypesSelectTheirVariantsAndEveryTypeIndependentOne) {
  const vk::Device& dev = context().device();
  const std::vector<std::string> all = names(Kernels::prewarm_keys(dev, std::nullopt));
  const std::vector<TensorType> types = {TensorType::Q4_0x8, TensorType::Q6_K};
  const std::vector<std::string> some = names(Kernels::prewarm_keys(dev, types));
  EXPECT_LT(some.size(), all.size());
  for (const std::string& n : some) EXPECT_TRUE(has(all, n)) << n;

  for (const OpRegistration* row : registered_ops()) {
    const bool runs = !row->available || row->available(dev);
    for (uint32_t i = 0; i < variant_count(*row); ++i) {
      if (!registers(*row, i)) continue;
      const std::string name = shader_variant(*row, i);
      if (!runs) {
        EXPECT_FALSE(has(all, name)) << name;
        continue;
      }
      EXPECT_TRUE(has(all, name)) << name;
      // Typed rows: the model's types and f32 only; untyped rows whole.
      const std::optional<TensorType> type = variant_type(*row, i);
      const bool wanted =
          !type || *type == TensorType::F32 || *type == TensorType::Q4_0x8 || *type == TensorType::Q6_K;
      EXPECT_EQ(has(some, name), wanted) << name;
    }
  }
  // The matrix ops of the model's types are there, the other types' are not.
  EXPECT_TRUE(has(some, "matvec1_q4_0x8"));
  const std::string q8 = matvec_q8_uses_int_dot(dev) ? "matvec_q8i_" : "matvec_q8_";
  EXPECT_TRUE(has(some, q8 + "norm_swiglu_q4_0x8")) << "a row naming its shader and typed variants";
  EXPECT_FALSE(has(some, q8 + "norm_q4_k"));
  EXPECT_TRUE(has(some, "matmul_q6_k"));
  EXPECT_TRUE(has(some, "get_rows_f32"));
  EXPECT_FALSE(has(some, "matvec_q8_0"));
  EXPECT_FALSE(has(some, "get_rows_f16"));
  EXPECT_TRUE(has(some, "kv_write_f16")) << "a single-variant row is always prewarmed";
  EXPECT_FALSE(has(all, "read_probe_u32")) << "benchmark-only rows are never prewarmed";
  EXPECT_FALSE(has(all, "attention_probe1"));
}

TEST_F(KernelsPrewarm, APrewarmForTypesCreatesExactlyItsKeys) {
  const std::vector<TensorType> types = {TensorType::F16};
  const size_t before = context().pipelines().size();
  const size_t expected = Kernels::prewarm_keys(context().device(), types).size();
  Kernels k(context(), types);
  k.finish_prewarm();
  // Pipelines created by earlier tests of this process may already be in the context's cache.
  EXPECT_LE(context().pipelines().size(), before + expected);
  for (const vk::PipelineKey& key : Kernels::prewarm_keys(context().device(), types))
    EXPECT_TRUE(context().pipelines().contains(key.variant, key.spec)) << key.variant;
  const size_t after = context().pipelines().size();
  k.pipeline(row("matvec"), TensorType::F16);  // prewarmed: no new pipeline
  k.pipeline(row("rms_norm"), 0);
  EXPECT_EQ(context().pipelines().size(), after);
  EXPECT_EQ(k.created_after_prewarm(), 0u);
  // A variant outside the selection is still served, and counted as a miss of the prewarm.
  const vk::ComputePipeline& q5_1 = k.pipeline(row("get_rows"), TensorType::Q5_1);
  EXPECT_EQ(q5_1.name(), "get_rows_q5_1");
  EXPECT_EQ(k.created_after_prewarm(), 1u);
  k.pipeline(row("get_rows"), TensorType::Q5_1);  // resolved once
  EXPECT_EQ(k.created_after_prewarm(), 1u);
  EXPECT_THROW(k.pipeline(row("rms_norm"), 4), Error) << "rms_norm has 4 variants";
}

}  // namespace
}  // namespace kvtrie::kernels

namespace kvtrie::vk {
namespace {

class PipelineStatistics : public test::VulkanTest {};

// keys() lists what the cache created, so the tuning tools can ask the driver about each pipeline.
TEST_F(PipelineStatistics, TheCacheListsItsKeys) {
  PipelineCache cache(context().device());
  cache.get("fill_f32", {64});
  cache.get("add_f32", {64});
  cache.get("add_f32", {128});
  const std::vector<PipelineKey> keys = cache.keys();
  ASSERT_EQ(keys.size(), 3u);
  for (const PipelineKey& key : keys) EXPECT_TRUE(cache.contains(key.variant, key.spec)) << key.variant;
  EXPECT_EQ(std::ranges::count_if(keys, [](const PipelineKey& k) { return k.variant == "add_f32"; }), 2);
}

// Statistics are the tuning tools' opt-in: a default context leaves the extension off (the engine's drivers
// compile as without it) and the call refuses with an Error. Asked for, where the device offers
// VK_KHR_pipeline_executable_properties (NVIDIA's driver does; lavapipe 22 does not), every compiled shader
// has named statistics with values; where it does not, the call still refuses instead of answering nothing.
// Both branches are asserted: the GPU run covers the second.
TEST_F(PipelineStatistics, TheDriverDescribesACompiledShaderOnlyWhenAskedAndOffered) {
  const SpirvBlob* blob = find_spirv("add_f32");
  ASSERT_NE(blob, nullptr);
  EXPECT_FALSE(context().device().pipeline_statistics_enabled());
  EXPECT_THROW(pipeline_statistics(context().device(), *blob, {64}), Error);

  ContextOptions options;
  options.pipeline_statistics = true;
  Context asked(options);
  const Device& device = asked.device();
  EXPECT_EQ(device.pipeline_statistics_enabled(), device.info().pipeline_executable_info);
  if (!device.pipeline_statistics_enabled()) {
    EXPECT_THROW(pipeline_statistics(device, *blob, {64}), Error);
    return;
  }
  const std::vector<ExecutableStatistic> stats = pipeline_statistics(device, *blob, {64});
  ASSERT_FALSE(stats.empty());
  for (const ExecutableStatistic& s : stats) {
    EXPECT_FALSE(s.name.empty());
    EXPECT_FALSE(s.value.empty());
    EXPECT_NE(s.value, "?") << s.name;
  }
}

}  // namespace
}  // namespace kvtrie::vk
