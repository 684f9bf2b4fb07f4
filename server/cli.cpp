#include "server/cli.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "runner/engine/batch_tokens.h"
#include "server/chat_template.h"
#include "server/config_file.h"
#include "server/daemon.h"
#include "server/devices.h"
#include "server/llama_server_args.h"

namespace kvtrie::server {

namespace {

std::string env_name(const std::string& option) {
  std::string name = "KVTRIE_";
  for (char c : option)
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

// An option that also reads KVTRIE_<NAME>, whose last value wins.
void opt(CLI::Option* option, const std::string& name) {
  option->envname(env_name(name))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

// API keys and TLS (docs/security.md). Keys are repeatable: every --api-key adds one (and so does each
// api-key line of the config file); KVTRIE_API_KEY gives one key when the command line gives none.
void add_security_options(CLI::App& app, ServeOptions& o) {
  app.add_option(
         "--api-key", o.api_keys,
         "require this key (Authorization: Bearer KEY or x-api-key: KEY) on every endpoint but /health; "
         "repeatable; a user key, its own tenant")
      ->envname(env_name("api-key"))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_size(1)
      ->allow_extra_args(false);
  opt(app.add_option("--api-key-file", o.api_key_file,
                     "API keys, one per line: KEY [TENANT] [admin] (re-read on SIGHUP)")
          ->check(CLI::ExistingFile),
      "api-key-file");
  opt(app.add_flag("--metrics-public", o.metrics_public, "serve /metrics without an API key"),
      "metrics-public");
  opt(app.add_option("--tenant-kv-share", o.tenant_kv_share,
                     "share of the device KV tier one tenant's cached prefixes may hold before its own are "
                     "evicted first (1: no limit)")
          ->capture_default_str()
          ->check(CLI::Range(0.01, 1.0)),
      "tenant-kv-share");
  opt(app.add_option("--ssl-cert-file", o.ssl_cert_file, "PEM certificate (chain): serve HTTPS only")
          ->check(CLI::ExistingFile),
      "ssl-cert-file");
  opt(app.add_option("--ssl-key-file", o.ssl_key_file, "PEM private key of --ssl-cert-file")
          ->check(CLI::ExistingFile),
      "ssl-key-file");
}

// KV events for prefix-aware routers in vLLM's format (docs/scale-out.md).
void add_kv_event_options(CLI::App& app, ServeOptions& o) {
  opt(app.add_option(
          "--kv-events", o.kv_events,
          "publish the KV cache's block events on this ZMQ PUB endpoint, as vLLM does (tcp://*:5557 "
          "binds; tcp://ROUTER:5557 connects)"),
      "kv-events");
  opt(app.add_option(
          "--kv-events-replay", o.kv_events_replay,
          "ZMQ ROUTER endpoint (bound) that replays buffered event batches from a sequence number"),
      "kv-events-replay");
  opt(app.add_option("--kv-events-topic", o.kv_events_topic,
                     "topic frame of every event message (llm-d expects kv@POD@MODEL)"),
      "kv-events-topic");
}

// The options shared by `serve` and `runner`. Each also reads KVTRIE_<NAME> from the environment; the config
// file's values are inserted before the user's arguments, and the last value of an option wins, so the order
// of precedence is: command line, environment, config file, default.
void add_serve_options(CLI::App& app, ServeOptions& o) {
  opt(app.add_option("--model,-m", o.model, "GGUF model file")->check(CLI::ExistingFile), "model");
  opt(app.add_option("--host", o.host, "address to listen on (loopback by default)")->capture_default_str(),
      "host");
  opt(app.add_option("--port", o.port, "TCP port")->capture_default_str(), "port");
  opt(app.add_option("--ctx-size,-c", o.ctx_size, "tokens per sequence (0: the model's training context)")
          ->capture_default_str()
          ->check(CLI::Range(0u, 1u << 24)),
      "ctx-size");
  opt(app.add_option("--parallel", o.parallel, "sequences decoded together")
          ->capture_default_str()
          ->check(CLI::Range(1u, 1024u)),
      "parallel");
  opt(app.add_option(
             "--batch-tokens", o.batch_tokens,
             "tokens of one forward pass at most: a prompt computed alone goes in chunks of this size")
          ->capture_default_str()
          ->check(CLI::Range(engine::kMinBatchTokens, engine::kMaxBatchTokens)),
      "batch-tokens");
  opt(app.add_option("--queue", o.queue, "requests that may wait for a slot before 503")
          ->capture_default_str(),
      "queue");
  opt(app.add_option("--kv-device-mb", o.kv_device_mb,
                     "KV cache budget in device memory (0: from free memory)")
          ->capture_default_str(),
      "kv-device-mb");
  opt(app.add_option("--kv-host-mb", o.kv_host_mb, "KV cache budget in host memory (0: from free memory)")
          ->capture_default_str(),
      "kv-host-mb");
  opt(app.add_option("--kv-disk-dir", o.kv_disk_dir,
                     "directory of the disk KV tier, kept across restarts (with --kv-disk-mb)"),
      "kv-disk-dir");
  opt(app.add_option("--kv-disk-mb", o.kv_disk_mb, "KV cache budget on disk (0: no disk tier)")
          ->capture_default_str(),
      "kv-disk-mb");
  opt(app.add_flag("--no-kv-disk-overlap", o.no_kv_disk_overlap,
                   "a disk hit waits for its whole read (default: it computes its first pages meanwhile, the "
                   "read takes the last pages first, and the two meet)"),
      "no-kv-disk-overlap");
  opt(app.add_option("--device", o.device, "Vulkan device index (see --list-devices)"), "device");
  opt(app.add_flag("--deterministic", o.deterministic,
                   "batch-invariant kernels: cached and cold runs agree exactly"),
      "deterministic");
  opt(app.add_option("--log-level", o.log_level, "trace, debug, info, warn, error, off")
          ->capture_default_str()
          ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"})),
      "log-level");
  opt(app.add_flag("--cpu-reference", o.cpu_reference, "serve with the slow CPU reference engine (tests)"),
      "cpu-reference");
  opt(app.add_option("--shutdown-grace-ms", o.shutdown_grace_ms,
                     "time in-flight requests get to finish on SIGTERM")
          ->capture_default_str(),
      "shutdown-grace-ms");
  opt(app.add_option("--max-body-mb", o.max_body_mb, "largest request body accepted")
          ->capture_default_str()
          ->check(CLI::Range(1u, 1024u)),
      "max-body-mb");
  add_security_options(app, o);
  add_kv_event_options(app, o);
}

// Finds --config FILE (or --config=FILE) in argv, else KVTRIE_CONFIG, else the default file when it exists.
std::optional<std::string> config_path(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) return std::string(argv[i + 1]);
    if (a.rfind("--config=", 0) == 0) return a.substr(9);
  }
  if (const char* env = std::getenv("KVTRIE_CONFIG"); env && *env) return std::string(env);
  if (std::filesystem::exists(kDefaultConfigPath)) return std::string(kDefaultConfigPath);
  return std::nullopt;
}

}  // namespace

void setup_logging(const std::string& level, bool with_prefix) {
  auto logger = spdlog::stderr_color_mt("kvtrie");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(with_prefix ? "%Y-%m-%d %H:%M:%S.%e %^%l%$ %v" : "%v");
  spdlog::set_level(spdlog::level::from_str(level));
}

int run_cli(int argc, char** argv) {
  const std::string program = std::filesystem::path(argc > 0 ? argv[0] : "kvtrie").filename().string();
  if (program == "llama-server") return run_llama_server(argc, argv);

  CLI::App app{"kvtrie: an LLM inference daemon with a prefix-trie KV cache shared by all conversations"};
  app.set_version_flag("--version", std::string("kvtrie ") + KVTRIE_VERSION);
  app.require_subcommand(0, 1);
  bool list = false;
  app.add_flag("--list-devices", list, "print the Vulkan devices and exit");

  ServeOptions serve_opts;
  std::string config_unused;
  CLI::App* serve = app.add_subcommand("serve", "run the daemon (native and OpenAI-compatible HTTP APIs)");
  add_serve_options(*serve, serve_opts);
  serve
      ->add_option("--chat-template", serve_opts.chat_template,
                   "chat format of /v1/chat/completions instead of the one recognised in the model (" +
                       chat_template_names() + ")")
      ->envname(env_name("chat-template"))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->check([](const std::string& name) {
        return chat_template_from_name(name)
                   ? std::string()
                   : "unknown chat template \"" + name + "\" (built in: " + chat_template_names() + ")";
      });
  serve->add_option("--config", config_unused,
                    std::string("config file of key = value lines (default ") + kDefaultConfigPath +
                        " when it exists; env KVTRIE_CONFIG)");

  ServeOptions runner_opts;
  runner_opts.mode = ApiMode::OllamaRunner;
  bool ollama_engine = false;
  CLI::App* runner = app.add_subcommand("runner", "serve Ollama's older runner protocol (ollama runner)");
  add_serve_options(*runner, runner_opts);
  runner->add_flag("--ollama-engine", ollama_engine,
                   "accepted for compatibility (kvtrie always uses its own engine)");

  // The config file applies to serve only: insert its values right after the subcommand name, where the
  // user's own arguments (and the environment) override them.
  std::vector<std::string> args(argv, argv + argc);
  auto sub_it = std::find(args.begin() + 1, args.end(), std::string("serve"));
  if (sub_it != args.end()) {
    if (auto path = config_path(argc, argv)) {
      auto entries = read_config_file(*path);
      if (auto* err = std::get_if<std::string>(&entries)) {
        std::cerr << "kvtrie: " << *err << '\n';
        return 2;
      }
      std::vector<std::string> inserted;
      for (const auto& [key, value] : std::get<ConfigEntries>(entries)) {
        if (key == "config" || !serve->get_option_no_throw("--" + key)) {
          std::cerr << "kvtrie: " << *path << ": unknown key \"" << key << "\"\n";
          return 2;
        }
        if (std::getenv(env_name(key).c_str())) continue;  // the environment overrides the file
        inserted.push_back("--" + key + "=" + value);
      }
      args.insert(sub_it + 1, inserted.begin(), inserted.end());
    }
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargs.size()), cargs.data());
  } catch (const CLI::ExtrasError&) {
    // CLI11 would print every unexpected argument whole; a mistyped --api-key=SECRET (or a key after a
    // mistyped flag) must not reach the log, so only the names of unexpected options are printed.
    std::string names;
    for (const std::string& a : args) {
      if (a.rfind("--", 0) != 0) continue;
      const std::string name = a.substr(0, a.find('='));
      bool known = app.get_option_no_throw(name) != nullptr;
      for (const CLI::App* sub : app.get_subcommands({}))
        known = known || sub->get_option_no_throw(name) != nullptr;
      if (!known) names += " " + name;
    }
    std::cerr << "kvtrie: unexpected arguments (values are not shown):"
              << (names.empty() ? " a value" : names) << "\nRun with --help for more information.\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (list) return list_devices();
  if (serve->parsed()) {
    setup_logging(serve_opts.log_level, true);
    if (serve_opts.model.empty()) {
      std::cerr
          << "kvtrie serve: --model PATH is required (or KVTRIE_MODEL, or model = PATH in the config file)\n";
      return 2;
    }
    return run_daemon(serve_opts);
  }
  if (runner->parsed()) {
    setup_logging(runner_opts.log_level, true);
    if (runner_opts.model.empty()) {
      std::cerr << "kvtrie runner: --model PATH is required\n";
      return 2;
    }
    if (ollama_engine) spdlog::info("--ollama-engine: accepted; kvtrie serves with its own engine");
    return run_daemon(runner_opts);
  }
  std::cout << app.help();
  return 0;
}

}  // namespace kvtrie::server
