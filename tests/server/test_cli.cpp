#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace {

std::string run(const std::string& args) {
  std::string cmd = std::string(KVTRIE_BINARY_DIR) + "/kvtrie " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 256> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
  return out;
}

TEST(Cli, VersionPrintsProjectVersion) {
  EXPECT_NE(run("--version").find("kvtrie 0."), std::string::npos);
}

TEST(Cli, HelpDescribesTheProgram) {
  EXPECT_NE(run("--help").find("prefix-trie KV cache"), std::string::npos);
}

}  // namespace
