// Contract: test helper that runs the real kvtrie binary on loopback: picks a free port, starts the process
// (optionally under another argv[0], e.g. a `llama-server` symlink), captures its stderr in a scratch file,
// waits for /health, and stops it with a signal, reporting the exit status and how long it took. The
// destructor kills a process still running, and fails the test when the daemon's log holds a sanitizer report
// (a sanitized build's daemon may report a race or leak at exit, after the test's own checks). Also writes
// tiny synthetic models and the `llama-server` link. One per test; not thread-safe.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/synthetic/synthetic_model.h"
#include "tests/support/paths.h"

namespace kvtrie::test {

// A sanitized daemon starts and stops several times slower (ThreadSanitizer's start-up, LeakSanitizer's scan
// of the KV tiers at exit): under load, the sanitizer jobs saw a 5 s wait for a refused flag's exit and a
// 20 s wait for SIGTERM's pass unanswered. Every wait below is stretched by this factor in those builds (a
// wait only ends early when the daemon is done, so no test becomes weaker).
#if defined(KVTRIE_SANITIZE_BUILD)
inline constexpr int kSanitizerSlowdown = 4;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

inline std::filesystem::path kvtrie_binary() {
  return std::filesystem::path(KVTRIE_BINARY_DIR) / "kvtrie";
}

// A `llama-server` symlink to the binary (in the test's scratch directory): run through it, kvtrie speaks
// llama-server's flags and API.
inline std::filesystem::path llama_server_link() {
  auto dir = scratch_dir() / "bin";
  std::filesystem::create_directories(dir);
  auto link = dir / "llama-server";
  std::filesystem::remove(link);
  std::filesystem::create_symlink(kvtrie_binary(), link);
  return link;
}

inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// A tiny random-weight llama (vocab 320, ctx 256): fast enough for every HTTP test.
inline std::filesystem::path tiny_model(const std::filesystem::path& dir) {
  return synth::write_preset(dir / "tiny.gguf", "tiny", TensorType::F32, 7);
}

// A slower model with a long context, for tests that need a generation to still be running (disconnect,
// SIGTERM): a few milliseconds per token on the CPU reference.
inline std::filesystem::path slow_model(const std::filesystem::path& dir) {
  synth::SynthOptions o;
  o.shape.n_layers = 4;
  o.shape.n_embd = 256;
  o.shape.n_heads = 4;
  o.shape.n_kv_heads = 2;
  o.shape.n_ff = 768;
  o.shape.n_ctx = 8192;
  o.seed = 3;
  auto path = dir / "slow.gguf";
  synth::write_model(path, o);
  return path;
}

class DaemonProcess {
 public:
  // args exclude argv[0]; program is what gets executed (a symlink changes argv[0]'s basename).
  DaemonProcess(std::vector<std::string> args, std::filesystem::path program = kvtrie_binary(),
                std::vector<std::string> env = {})
      : log_path_(scratch_dir() / ("daemon-" + std::to_string(counter()++) + ".log")) {
    // Truncated here, before the fork: when the child did it, log() could still read a previous run's file.
    const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fd, 2);
      dup2(fd, 1);
      for (auto& e : env) putenv(e.data());
      std::vector<char*> argv;
      std::string prog = program.string();
      argv.push_back(prog.data());
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(prog.c_str(), argv.data());
      _exit(127);
    }
    close(fd);
  }
  ~DaemonProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    const std::string text = log();
    for (const char* report :
         {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "ThreadSanitizer:", "runtime error: "})
      if (text.find(report) != std::string::npos) {
        ADD_FAILURE() << "sanitizer report in the daemon's log " << log_path_ << ":\n" << text;
        break;
      }
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // Polls GET path until it answers 200 (true) or the process exits / the timeout passes (false).
  bool wait_ready(int port, std::chrono::milliseconds timeout = std::chrono::seconds(20),
                  const char* path = "/health") {
    const auto deadline = std::chrono::steady_clock::now() + timeout * kSanitizerSlowdown;
    while (std::chrono::steady_clock::now() < deadline) {
      if (has_exited()) return false;
      httplib::Client c("127.0.0.1", port);
      c.set_connection_timeout(0, 200000);
      if (auto r = c.Get(path); r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Ollama's runner protocol answers GET /health with 200 while it loads ({"status": 2 or 3}): waits for
  // {"status": 0}, ready, as Ollama does before its first request.
  bool wait_runner_ready(int port, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout * kSanitizerSlowdown;
    if (!wait_ready(port, timeout)) return false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (has_exited()) return false;
      httplib::Client c("127.0.0.1", port);
      if (auto r = c.Get("/health");
          r && r->status == 200 && r->body.find("\"status\":0") != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  bool has_exited() {
    if (exited_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = status;
    }
    return exited_;
  }

  // Waits for exit (up to timeout); the exit code, or nullopt when it did not exit normally in time.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout * kSanitizerSlowdown;
    while (!has_exited() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!exited_ || !WIFEXITED(status_)) return std::nullopt;
    return WEXITSTATUS(status_);
  }
  // "exit N", "signal N" or "running", for failure messages.
  std::string how_it_ended() {
    if (!has_exited()) return "running";
    if (WIFEXITED(status_)) return "exit " + std::to_string(WEXITSTATUS(status_));
    return "signal " + std::to_string(WIFSIGNALED(status_) ? WTERMSIG(status_) : -1);
  }

  void signal(int sig) { kill(pid_, sig); }
  pid_t pid() const { return pid_; }

  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path log_path_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

// A raw HTTP/1.1 POST on a socket, for tests that must drop the connection mid-response: sends the request,
// reads until `min_bytes` of response arrived (or the peer closed), then closes the socket. Returns what was
// read.
inline std::string post_and_hang_up(int port, const std::string& path, const std::string& body,
                                    size_t min_bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string got;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string req = "POST " + path +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      while (got.size() < min_bytes) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return got;
}

// Splits a body into its non-empty lines.
inline std::vector<std::string> lines_of(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace kvtrie::test
