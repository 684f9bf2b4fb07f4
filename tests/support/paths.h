// Contract: where tests find their data. ../shared (beside the checkout) holds the real models and vocab
// files; it exists on developer machines and in CI but not in a user's fresh clone, so tests that need it
// call KVTRIE_REQUIRE_SHARED(path), which skips with a message naming the missing path. Everything else a
// test needs it makes itself under scratch_dir(). Thread-safe (pure functions of the environment).
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace kvtrie::test {

// ../shared beside the source tree, or $KVTRIE_SHARED_DIR when set.
std::filesystem::path shared_dir();
// A fresh per-test directory under the build tree, created on first use.
std::filesystem::path scratch_dir();

}  // namespace kvtrie::test

// Skip (never silently: the message names the path) when a file from ../shared is absent.
#define KVTRIE_REQUIRE_SHARED(relative)                                                    \
  do {                                                                                     \
    if (!std::filesystem::exists(::kvtrie::test::shared_dir() / (relative)))               \
      GTEST_SKIP() << "test data " << (::kvtrie::test::shared_dir() / (relative)).string() \
                   << " is absent (../shared exists only on developer and CI machines)";   \
  } while (0)
