#include "server/daemon.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "server/api_admin.h"
#include "server/api_llama.h"
#include "server/api_native.h"
#include "server/api_ollama_runner.h"
#include "server/api_openai.h"
#include "server/authenticator.h"
#include "server/devices.h"
#include "server/http_server.h"
#include "server/model_host.h"

namespace kvtrie::server {

namespace {

// Set by the handler when a shutdown signal reaches a thread that does not block it (a library thread that
// reset its mask): the main loop sees it as well as what sigtimedwait collects, and the default action (dying
// mid-teardown) never runs.
std::atomic<int> g_signal_seen{0};
std::atomic<bool> g_reload_seen{false};
extern "C" void on_shutdown_signal(int sig) {
  g_signal_seen.store(sig);
}
extern "C" void on_reload_signal(int) {
  g_reload_seen.store(true);
}

// SIGTERM and SIGINT stop the daemon; SIGHUP re-reads the API key file.
sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

void install_handler(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, nullptr);
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

void reload_keys(Authenticator& auth) {
  if (!auth.has_key_file()) {
    spdlog::info("SIGHUP: no --api-key-file to re-read");
    return;
  }
  std::string message;
  if (auth.reload(message))
    spdlog::info("SIGHUP: API key file re-read: {}", message);
  else
    spdlog::error("SIGHUP: {}", message);
}

// Security settings that cannot work, as a message; "" when they are fine.
std::string check_security(const ServeOptions& o) {
  if (o.ssl_cert_file.empty() != o.ssl_key_file.empty())
    return "--ssl-cert-file and --ssl-key-file go together: give both, or neither for plain HTTP";
  return "";
}

const char* mode_name(ApiMode mode) {
  switch (mode) {
    case ApiMode::Native:
      return "native and OpenAI-compatible";
    case ApiMode::LlamaServer:
      return "llama-server compatible";
    case ApiMode::OllamaRunner:
      return "Ollama runner (legacy)";
  }
  return "?";
}

}  // namespace

int run_daemon(const ServeOptions& options) {
  // Block the shutdown signals before any thread starts, so every thread inherits the mask and the main
  // thread alone collects them with sigtimedwait. A client that vanishes must not kill us with SIGPIPE.
  sigset_t signals = handled_signals();
  install_handler(SIGTERM, on_shutdown_signal);
  install_handler(SIGINT, on_shutdown_signal);
  install_handler(SIGHUP, on_reload_signal);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (options.mode == ApiMode::LlamaServer && (options.verbose || options.model.empty())) {
    // Ollama's device discovery reads these from stderr (one line per device, then system_info:).
    print_discovery_lines();
  }

  if (std::string bad = check_security(options); !bad.empty()) {
    spdlog::error("{}", bad);
    return 1;
  }
  Authenticator auth(AuthOptions{options.api_keys, options.api_key_file, options.metrics_public});
  if (std::string message; !auth.reload(message)) {
    spdlog::error("{}", message);
    return 1;
  } else if (auth.enabled()) {
    spdlog::info("API keys required on every endpoint but /health{}: {}",
                 options.metrics_public ? " and /metrics" : "", message);
  } else if (!is_loopback(options.host)) {
    spdlog::warn(
        "listening on {} without API keys: anyone who can reach the port may generate, read the cache "
        "statistics and flush the cache (see --api-key, --api-key-file and docs/security.md)",
        options.host);
  }

  ModelHost host(options);
  HttpServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.threads = std::max<size_t>(32, size_t{options.parallel} + options.queue + 8);
  http.max_body_bytes = size_t{options.max_body_mb} << 20;
  http.tls_cert_file = options.ssl_cert_file;
  http.tls_key_file = options.ssl_key_file;
  HttpServer server(http);
  server.set_gate([&auth](HttpRequest& request, Access access) { return auth.admit(request, access); });
  switch (options.mode) {
    case ApiMode::Native:
      register_native_api(server, host);
      register_openai_api(server, host);
      break;
    case ApiMode::LlamaServer:
      register_llama_api(server, host);
      register_openai_api(server, host);
      break;
    case ApiMode::OllamaRunner:
      register_ollama_runner_api(server, host);
      break;
  }
  register_admin_api(server, host, auth);

  std::string error;
  if (!server.start(error)) {
    spdlog::error("{}", error);
    return 1;
  }
  spdlog::info("kvtrie {} listening on {}://{}:{} ({} API)", KVTRIE_VERSION, server.tls() ? "https" : "http",
               options.host, server.port(), mode_name(options.mode));

  std::atomic<bool> load_finished{false};
  std::atomic<bool> load_failed{false};
  std::thread loader;
  if (!options.model.empty()) {
    loader = std::thread([&] {
      if (host.load()) {
        spdlog::info("model loaded; ready to serve");
        sd_notify(0, "READY=1\nSTATUS=serving");
      } else {
        load_failed = true;
      }
      load_finished = true;
    });
  } else {
    spdlog::warn("no model given: answering /health only");
    sd_notify(0, "READY=1\nSTATUS=no model");
  }

  int exit_code = 0;
  for (;;) {
    timespec tick{0, 200'000'000};
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGHUP || (sig <= 0 && g_reload_seen.exchange(false))) {
      reload_keys(auth);
      continue;
    }
    if (sig <= 0) sig = g_signal_seen.load();
    if (sig > 0) {
      spdlog::info("received {}, shutting down (grace period {} ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   options.shutdown_grace_ms);
      break;
    }
    if (load_failed) {
      exit_code = 1;
      break;
    }
  }
  sd_notify(0, "STOPPING=1");

  if (!load_finished && !options.model.empty()) {
    // Interrupting a load half-way is not supported by the engines; nothing is in flight, so just leave.
    server.stop();
    spdlog::info("stopped while loading the model");
    std::_Exit(exit_code);
  }
  if (loader.joinable()) loader.join();

  // Draining: the engine refuses new work (503) and finishes in-flight generations within the grace period,
  // cancelling the rest; each stream then delivers its final chunk. Only when the streams have drained do we
  // close the listener, because closing it makes the HTTP library cut every open response short.
  if (LoadedModel* model = host.model()) {
    model->engine->shutdown(std::chrono::milliseconds(options.shutdown_grace_ms));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (server.open_streams() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  server.stop();
  spdlog::info("shutdown complete");
  return exit_code;
}

}  // namespace kvtrie::server
