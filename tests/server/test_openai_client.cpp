// `kvtrie serve` driven by OpenAI's official client library for Node.js (the `openai` npm package), on the
// Vulkan engine (lavapipe) so that the prefix cache serves a conversation's second turn. The package is
// installed from the npm registry into a scratch folder of the build tree (once; later runs reuse it); the
// test skips, saying so, only when the registry cannot be reached. The checks themselves are in
// openai_client_check.mjs; this test runs it and reads its summary.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

// The client version the checks were written against; bump deliberately.
constexpr const char* kOpenAiPackage = "openai@6.49.0";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult run(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The path in single quotes for the shell (built by appending: GCC 12 at -O3 reports a bogus -Wrestrict for
// const char* + std::string&&).
std::string quoted(const std::filesystem::path& p) {
  return std::string("'").append(p.string()).append("'");
}

// npm's codes for a registry it cannot reach (DNS, refused, reset, timed out, offline), and timeout's 124.
bool registry_unreachable(const CommandResult& r) {
  if (r.exit_code == 124) return true;
  for (const char* code : {"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH",
                           "EHOSTUNREACH", "ENOTCACHED", "network request to"})
    if (r.output.find(code) != std::string::npos) return true;
  return false;
}

TEST(OpenAiClient, TheOfficialNodeClientListsChatsStreamsCompletesAndSeesCachedTokens) {
  ASSERT_EQ(run("node --version").exit_code, 0) << "Node.js is missing (scripts/install-deps installs it)";
  ASSERT_EQ(run("npm --version").exit_code, 0) << "npm is missing (scripts/install-deps installs it)";

  // Under the build tree, not the per-run scratch folder: a rerun reuses the installed package.
  const auto dir = std::filesystem::path(KVTRIE_BINARY_DIR) / "openai-client";
  std::filesystem::create_directories(dir);
  const std::string version = std::string(kOpenAiPackage).substr(std::string(kOpenAiPackage).find('@') + 1);
  const CommandResult installed =
      run("node -p \"require(" + json((dir / "node_modules/openai/package.json").string()).dump() +
          ").version\"");
  if (installed.exit_code != 0 || installed.output.find(version) == std::string::npos) {
    const CommandResult install =
        run("cd " + quoted(dir) + " && timeout 300 npm install --no-audit --no-fund --no-save " +
            "--loglevel=error --fetch-retries=1 --fetch-timeout=60000 " + kOpenAiPackage);
    if (install.exit_code != 0 && registry_unreachable(install))
      GTEST_SKIP() << "the npm registry cannot be reached, so the openai package cannot be installed:\n"
                   << install.output;
    ASSERT_EQ(install.exit_code, 0) << "npm install " << kOpenAiPackage << " failed:\n" << install.output;
  }
  std::filesystem::copy_file(
      std::filesystem::path(KVTRIE_SOURCE_DIR) / "tests/server/openai_client_check.mjs", dir / "check.mjs",
      std::filesystem::copy_options::overwrite_existing);

  const int port = free_port();
  DaemonProcess daemon({"serve", "--model", tiny_model(scratch_dir()).string(), "--port",
                        std::to_string(port), "--ctx-size", "256", "--deterministic"});
  ASSERT_TRUE(daemon.wait_ready(port, std::chrono::seconds(60))) << daemon.log();

  const CommandResult check = run("KVTRIE_BASE_URL=http://127.0.0.1:" + std::to_string(port) +
                                  "/v1 timeout 180 node " + quoted(dir / "check.mjs"));
  ASSERT_EQ(check.exit_code, 0) << check.output << "\n--- daemon log ---\n" << daemon.log();
  const auto lines = lines_of(check.output);
  ASSERT_FALSE(lines.empty());
  const json summary = json::parse(lines.back(), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << check.output;
  EXPECT_GE(summary["second_cached_tokens"].get<int>(), summary["first_prompt_tokens"].get<int>()) << summary;

  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(std::chrono::seconds(20)), 0) << daemon.log();
  EXPECT_EQ(daemon.log().find("vulkan validation"), std::string::npos) << daemon.log();
}

}  // namespace
}  // namespace kvtrie::test
