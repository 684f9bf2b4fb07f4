#include "tests/support/paths.h"

#include <unistd.h>

#include <cstdlib>

namespace kvtrie::test {

std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("KVTRIE_SHARED_DIR")) return env;
  return std::filesystem::path(KVTRIE_SOURCE_DIR).parent_path() / "shared";
}

std::filesystem::path scratch_dir() {
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  // Outside a test (SetUpTestSuite), per process: ctest runs each test case as its own process, in parallel.
  std::string name =
      info ? std::string(info->test_suite_name()) + "." + info->name() : "suite-" + std::to_string(getpid());
  for (char& c : name)
    if (c == '/') c = '_';
  std::filesystem::path dir = std::filesystem::path(KVTRIE_BINARY_DIR) / "test-scratch" / name;
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvtrie::test
