// Contract: test helpers that run a shell command (bench/*.py scripts) and capture its stdout. Header-only,
// thread-safe (no shared state); the command's stderr goes to the test's stderr.
#pragma once
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace kvtrie::test {

inline bool have_python3() {
  return std::system("command -v python3 >/dev/null 2>&1") == 0;
}

// Runs `command` through /bin/sh; returns (exit status or -1 when it did not exit normally, stdout).
inline std::pair<int, std::string> run_command(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {-1, out};
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace kvtrie::test
