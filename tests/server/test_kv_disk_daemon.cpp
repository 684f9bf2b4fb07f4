// The disk KV tier (--kv-disk-dir, issue 11) in the real daemon on lavapipe, with a synthetic model whose
// 64 KiB pages overflow 1 MiB device and host tiers within a few requests, and with stories260K: a long
// prompt served, SIGTERM, a restart, and the same prompt comes back from disk (cached_tokens_disk: all of it
// with --no-kv-disk-overlap, what the read got to with the default overlap) with the tokens of its cold run
// under --deterministic; kill -9 at random moments (while traffic spills to disk, or
// during SIGTERM's persist) never keeps the next start from serving correctly; a flipped byte, a truncated
// file, a stray temporary file and another model's file are refused and the request served as cold; a budget
// below the working set bounds the directory; a full disk (RLIMIT_FSIZE on the daemon) turns the tier off
// with a log line while every request is served.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/server/daemon_process.h"
#include "tests/support/paths.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// 4 layers of 4 KV heads of 64: a 16-token page is 64 KiB, 16 pages a MiB; a narrow residual stream keeps
// it cheap on the CPU.
fs::path wide_model(const fs::path& dir, uint64_t seed) {
  synth::SynthOptions o;
  o.shape = {
      .n_layers = 4, .n_embd = 64, .n_heads = 4, .n_kv_heads = 4, .head_dim = 64, .n_ff = 192, .n_ctx = 1024};
  o.seed = seed;
  const fs::path path = dir / ("wide-" + std::to_string(seed) + ".gguf");
  synth::write_model(path, o);
  return path;
}

// Byte tokens (3..258) every model here has: a prompt of n of them, the same for the same seed.
std::vector<int> prompt_tokens(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(3, 258);
  std::vector<int> out(n);
  for (int& t : out) t = id(rng);
  return out;
}

std::vector<fs::path> page_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kvpage") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Bytes of every file in the directory (page files, temporary files, the lock).
uint64_t directory_bytes(const fs::path& dir) {
  uint64_t sum = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) sum += e.file_size();
  return sum;
}

// An empty directory under the test's scratch directory (which an earlier run may have left).
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = scratch_dir() / name;
  fs::remove_all(dir);
  return dir;
}

// The fingerprint half of <fingerprint>-<hash>.kvpage.
std::string fingerprint_of(const fs::path& file) {
  return file.filename().string().substr(0, 16);
}

class KvDiskDaemon : public ::testing::Test {
 protected:
  static constexpr size_t kPromptTokens = 120;  // 7 full pages
  static constexpr int kMaxTokens = 4;

  // The daemon on `model` with 1 MiB device and host tiers and the disk tier in `dir`; `wrapper` is a shell
  // script run before exec'ing it (e.g. ulimits). Not waited for. whole_read: --no-kv-disk-overlap (a disk
  // hit reads every page of the run instead of computing the first ones meanwhile).
  std::unique_ptr<DaemonProcess> launch(const fs::path& model, const fs::path& dir, int disk_mb = 64,
                                        const std::string& wrapper = "", bool whole_read = false) {
    std::vector<std::string> args = {"serve",
                                     "--model",
                                     model.string(),
                                     "--port",
                                     std::to_string(port_),
                                     "--ctx-size",
                                     "512",
                                     "--parallel",
                                     "1",
                                     "--deterministic",
                                     "--kv-device-mb",
                                     "1",
                                     "--kv-host-mb",
                                     "1",
                                     "--kv-disk-dir",
                                     dir.string(),
                                     "--kv-disk-mb",
                                     std::to_string(disk_mb)};
    if (whole_read) args.push_back("--no-kv-disk-overlap");
    if (wrapper.empty()) return std::make_unique<DaemonProcess>(args);
    args.insert(args.begin(), {"-c", wrapper + "; exec \"$0\" \"$@\"", kvtrie_binary().string()});
    return std::make_unique<DaemonProcess>(args, "/bin/sh");
  }
  // SIGTERM: the daemon persists its cache, exits 0 and logged no validation message.
  void stop(DaemonProcess& d) {
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait_exit(std::chrono::seconds(30)), 0) << d.log();
    EXPECT_EQ(d.log().find("vulkan validation"), std::string::npos) << d.log();
  }
  // Greedy, a fixed length whatever the tokens: the answer object, or null when the request failed.
  json generate(const std::vector<int>& tokens, bool expect_ok = true) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    const json body = {{"tokens", tokens},
                       {"max_tokens", kMaxTokens},
                       {"temperature", 0},
                       {"ignore_eos", true},
                       {"stream", false}};
    auto r = c.Post("/generate", body.dump(), "application/json");
    if (expect_ok) {
      EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    }
    if (!r || r->status != 200) return nullptr;
    return json::parse(r->body, nullptr, false);
  }
  json cache() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/cache");
    EXPECT_TRUE(r && r->status == 200);
    return r ? json::parse(r->body, nullptr, false) : json();
  }
  std::string metrics() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    return r ? r->body : "";
  }
  // Serves the reference prompt on a fresh directory: its cold tokens. Leaves the persisted pages in `dir`.
  std::vector<int> cold_run(const fs::path& model, const fs::path& dir) {
    auto d = launch(model, dir);
    EXPECT_TRUE(d->wait_ready(port_, std::chrono::seconds(60))) << d->log();
    const json cold = generate(reference_);
    stop(*d);
    if (cold.is_null()) return {};
    EXPECT_EQ(cold["cached_tokens"], 0);
    return cold["tokens"].get<std::vector<int>>();
  }
  // Serves the reference prompt on `dir` and checks it gives cold_tokens: how many came from disk (-1: not
  // served). Keeps the daemon's /cache and log for the caller.
  int serve_reference(const fs::path& model, const fs::path& dir, const std::vector<int>& cold_tokens,
                      bool whole_read = false) {
    auto d = launch(model, dir, 64, "", whole_read);
    EXPECT_TRUE(d->wait_ready(port_, std::chrono::seconds(60))) << d->log();
    const json hit = generate(reference_);
    if (hit.is_null()) return -1;
    EXPECT_EQ(hit["tokens"].get<std::vector<int>>(), cold_tokens) << hit.dump();
    last_cache_ = cache();
    stop(*d);
    last_log_ = d->log();
    return hit["cached_tokens_disk"].get<int>();
  }
  // Twice: with the default overlap (the hit computes its first pages while the last ones are read, so some
  // pages may come from disk and the rest are computed) and reading the whole run (every full page but the
  // one holding the last token, which is always computed, comes from disk).
  void restart_serves_from_disk(const fs::path& model) {
    const fs::path dir = fresh_dir("disk");
    const std::vector<int> cold_tokens = cold_run(model, dir);
    ASSERT_EQ(cold_tokens.size(), size_t{kMaxTokens});
    ASSERT_FALSE(page_files(dir).empty()) << "SIGTERM persisted no page";
    for (const auto& f : page_files(dir))  // private files in a private directory
      EXPECT_EQ(fs::status(f).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
    EXPECT_EQ(fs::status(dir).permissions() & fs::perms::all, fs::perms::owner_all);

    for (bool whole_read : {false, true}) {
      SCOPED_TRACE(whole_read ? "--no-kv-disk-overlap" : "overlap");
      auto d = launch(model, dir, 64, "", whole_read);
      ASSERT_TRUE(d->wait_ready(port_, std::chrono::seconds(60))) << d->log();
      const json hit = generate(reference_);
      ASSERT_FALSE(hit.is_null());
      EXPECT_EQ(hit["tokens"].get<std::vector<int>>(), cold_tokens) << hit.dump();
      const int full_pages = (kPromptTokens - 1) / 16 * 16, disk = hit["cached_tokens_disk"].get<int>();
      // With the overlap, where the computing and the read meet depends on their speeds: any whole pages.
      if (whole_read) {
        EXPECT_EQ(disk, full_pages) << hit.dump();
      } else {
        EXPECT_LE(disk, full_pages) << hit.dump();
        EXPECT_EQ(disk % 16, 0) << hit.dump();
      }
      EXPECT_EQ(hit["cached_tokens"], hit["cached_tokens_disk"]);
      const json c = cache();
      EXPECT_TRUE(c["disk"]["enabled"].get<bool>());
      if (whole_read) {
        EXPECT_GT(c["disk"]["reads"].get<int>(), 0) << c.dump();
      }
      EXPECT_EQ(c["disk"]["hit_tokens"], hit["cached_tokens_disk"]);
      EXPECT_NE(metrics().find("kvtrie_cache_disk_reads_total"), std::string::npos);
      stop(*d);
    }
  }

  int port_ = free_port();
  const std::vector<int> reference_ = prompt_tokens(1, kPromptTokens);
  json last_cache_;
  std::string last_log_;
};

TEST_F(KvDiskDaemon, ARestartServesTheLongPromptFromDiskWithTheColdTokensSynthetic) {
  restart_serves_from_disk(wide_model(scratch_dir(), 5));
}

TEST_F(KvDiskDaemon, ARestartServesTheLongPromptFromDiskWithTheColdTokensStories260K) {
  KVTRIE_REQUIRE_SHARED("models/stories260K.gguf");
  restart_serves_from_disk(shared_dir() / "models/stories260K.gguf");
}

TEST_F(KvDiskDaemon, KillNineAtRandomMomentsNeverKeepsTheNextStartFromServingCorrectly) {
  const fs::path model = wide_model(scratch_dir(), 5), dir = fresh_dir("disk");
  const std::vector<int> cold_tokens = cold_run(model, dir);
  ASSERT_EQ(cold_tokens.size(), size_t{kMaxTokens});
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("moments from seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  int disk_hits = 0;
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // Each start reads the whole run (--no-kv-disk-overlap): every page a kill may have torn is read.
    auto d = launch(model, dir, 64, "", true);
    ASSERT_TRUE(d->wait_ready(port_, std::chrono::seconds(60))) << d->log();
    // No temporary file survives the start, and the reference prompt is served exactly.
    for (const auto& e : fs::directory_iterator(dir)) EXPECT_NE(e.path().extension(), ".tmp") << e.path();
    const json hit = generate(reference_);
    ASSERT_FALSE(hit.is_null());
    EXPECT_EQ(hit["tokens"].get<std::vector<int>>(), cold_tokens) << hit.dump();
    if (hit["cached_tokens_disk"].get<int>() > 0) ++disk_hits;
    // Distinct prompts the trie has not seen: what a kill can interrupt the writing of.
    auto distinct = [&, round, next = uint32_t{0}]() mutable {
      return generate(prompt_tokens(1000 * (round + 1) + next++, kPromptTokens), false);
    };
    if (round % 2 == 0) {
      // Mid-traffic: once the 1 MiB tiers overflow to disk, a kill while further prompts keep it writing.
      std::atomic<bool> stop{false};
      std::thread traffic([&] {
        while (!stop && !distinct().is_null()) {
        }
      });
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (cache()["disk"]["writes"].get<int>() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 200)(rng)));
      d->signal(SIGKILL);
      stop = true;
      traffic.join();
    } else {
      // Mid-persist: SIGTERM writes the new pages of two prompts (a few milliseconds), and the kill lands
      // before, during or after.
      distinct();
      distinct();
      d->signal(SIGTERM);
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<int>(0, 5000)(rng)));
      d->signal(SIGKILL);
    }
    d->wait_exit(std::chrono::seconds(10));
  }
  EXPECT_GT(disk_hits, 0) << "no start after a kill found the prompt on disk";
  // And a last clean start after all that.
  EXPECT_GE(serve_reference(model, dir, cold_tokens, true), 0);
}

TEST_F(KvDiskDaemon, FlippedTruncatedAndForeignPageFilesAreRefusedAndTheRequestServedCold) {
  const fs::path model = wide_model(scratch_dir(), 5), other = wide_model(scratch_dir(), 6);
  const fs::path pristine = fresh_dir("pristine"), foreign = fresh_dir("foreign");
  const std::vector<int> cold_tokens = cold_run(model, pristine);
  ASSERT_EQ(cold_tokens.size(), size_t{kMaxTokens});
  ASSERT_FALSE(page_files(pristine).empty());
  ASSERT_EQ(cold_run(other, foreign).size(), size_t{kMaxTokens});  // the same prompt's pages of another model
  ASSERT_FALSE(page_files(foreign).empty());
  const std::string ours = fingerprint_of(page_files(pristine)[0]);
  ASSERT_NE(fingerprint_of(page_files(foreign)[0]), ours);

  // A copy of the pristine directory with every page file of this model damaged by `damage`.
  const auto damaged = [&](const std::string& name, const std::function<void(const fs::path&)>& damage) {
    const fs::path dir = fresh_dir(name);
    fs::copy(pristine, dir, fs::copy_options::recursive);
    for (const auto& f : page_files(dir)) damage(f);
    return dir;
  };
  const auto flip_a_byte = [](const fs::path& f) {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(static_cast<std::streamoff>(fs::file_size(f) / 2));
    const char c = static_cast<char>(io.get() ^ 0x10);
    io.seekp(static_cast<std::streamoff>(fs::file_size(f) / 2));
    io.put(c);
  };
  const auto truncate = [](const fs::path& f) { fs::resize_file(f, fs::file_size(f) / 2); };
  // The other model's file for the same page (same tokens: same hash), under this model's name (the pages of
  // generated tokens differ between the models).
  const auto replace_with_foreign = [&](const fs::path& f) {
    const fs::path theirs =
        foreign / (fingerprint_of(page_files(foreign)[0]) + f.filename().string().substr(16));
    if (fs::exists(theirs)) fs::copy_file(theirs, f, fs::copy_options::overwrite_existing);
  };

  // Each read whole (--no-kv-disk-overlap), so that every damaged file is read, and refused.
  const fs::path flipped = damaged("flipped", flip_a_byte);
  EXPECT_EQ(serve_reference(model, flipped, cold_tokens, true), 0);
  EXPECT_GE(last_cache_["disk"]["refused"].get<int>(), 1) << last_cache_.dump();
  EXPECT_NE(last_log_.find("refused and removed a corrupt page file"), std::string::npos) << last_log_;

  // Torn pages, and the half-written temporary file a kill -9 mid-write leaves: all removed at start.
  const fs::path truncated = damaged("truncated", truncate);
  fs::copy_file(page_files(truncated)[0],
                truncated / (page_files(truncated)[0].filename().string() + ".tmp"));
  const auto files = page_files(truncated).size() + 1;
  EXPECT_EQ(serve_reference(model, truncated, cold_tokens, true), 0);
  EXPECT_EQ(last_cache_["disk"]["refused"].get<size_t>(), files) << last_cache_.dump();
  EXPECT_NE(last_log_.find("removed " + std::to_string(files) + " incomplete files"), std::string::npos)
      << last_log_;

  const fs::path swapped = damaged("swapped", replace_with_foreign);
  EXPECT_EQ(serve_reference(model, swapped, cold_tokens, true), 0);
  EXPECT_GE(last_cache_["disk"]["refused"].get<int>(), 1) << last_cache_.dump();
  EXPECT_NE(last_log_.find("refused and removed a foreign page file"), std::string::npos) << last_log_;

  // Under its own names another model's pages are never read, nor counted as this model's.
  EXPECT_EQ(serve_reference(model, foreign, cold_tokens, true), 0);
  EXPECT_EQ(last_cache_["disk"]["refused"], 0) << last_cache_.dump();
  EXPECT_EQ(last_cache_["disk"]["reads"], 0) << last_cache_.dump();
}

TEST_F(KvDiskDaemon, ADiskBudgetSmallerThanTheWorkingSetBoundsTheDirectory) {
  const fs::path model = wide_model(scratch_dir(), 5), dir = fresh_dir("disk");
  constexpr uint64_t budget = 1 << 20;  // 15 page files; the prompts below are 64 pages
  auto d = launch(model, dir, 1);
  ASSERT_TRUE(d->wait_ready(port_, std::chrono::seconds(60))) << d->log();
  for (uint32_t i = 0; i < 8; ++i) {
    ASSERT_FALSE(generate(prompt_tokens(200 + i, kPromptTokens)).is_null());
    EXPECT_LE(directory_bytes(dir), budget) << "after request " << i;
  }
  const json c = cache();
  EXPECT_GT(c["disk"]["writes"].get<int>(), 15) << c.dump();
  EXPECT_GT(c["disk"]["evictions"].get<int>(), 0) << c.dump();
  EXPECT_LE(c["disk"]["bytes_used"].get<uint64_t>(), budget) << c.dump();
  stop(*d);  // persisting every cached page at shutdown stays within it too
  EXPECT_LE(directory_bytes(dir), budget);
  EXPECT_GT(page_files(dir).size(), 0u);
}

TEST_F(KvDiskDaemon, AFullDiskTurnsTheTierOffWithALogLineAndEveryRequestIsServed) {
  const fs::path model = wide_model(scratch_dir(), 5), dir = fresh_dir("disk");
  // No file of the daemon may grow past 32 KiB (ulimit counts 512-byte blocks): each 64 KiB page write fails
  // as on a full disk (EFBIG; SIGXFSZ ignored), while its short log fits.
  auto d = launch(model, dir, 64, "trap '' XFSZ; ulimit -f 64");
  ASSERT_TRUE(d->wait_ready(port_, std::chrono::seconds(60))) << d->log();
  const json cold = generate(reference_);
  ASSERT_FALSE(cold.is_null());
  for (uint32_t i = 0; i < 5; ++i)  // pushes the reference prompt's pages off the host tier, towards disk
    ASSERT_FALSE(generate(prompt_tokens(300 + i, kPromptTokens)).is_null());
  const json again = generate(reference_);
  ASSERT_FALSE(again.is_null());
  EXPECT_EQ(again["tokens"], cold["tokens"]);
  EXPECT_EQ(again["cached_tokens_disk"], 0);
  const json c = cache();
  EXPECT_FALSE(c["disk"]["enabled"].get<bool>()) << c.dump();
  EXPECT_EQ(c["disk"]["writes"], 0) << c.dump();
  EXPECT_NE(metrics().find("kvtrie_cache_disk_enabled 0"), std::string::npos);
  stop(*d);
  EXPECT_NE(d->log().find("kv disk tier off until restart"), std::string::npos) << d->log();
  EXPECT_TRUE(page_files(dir).empty());
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

}  // namespace
}  // namespace kvtrie::test
