#include "server/llama_server_args.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <iostream>
#include <map>
#include <set>

#include "runner/engine/batch_tokens.h"
#include "server/cli.h"
#include "server/daemon.h"
#include "server/devices.h"

namespace kvtrie::server {

namespace {

enum class Arg {
  Model,
  Port,
  Host,
  Ctx,
  Parallel,
  Verbosity,
  ChatTemplate,
  Verbose,
  ListDevices,
  NoLogPrefix,
  NoLogTimestamps,
  Help,
  Version,
  IgnoredValue,
  IgnoredFlag,
  FlashAttn,
  MaxBodyMb,
  BatchSize,
  ApiKey,
  ApiKeyFile,
  SslCertFile,
  SslKeyFile,
  MetricsPublic,
  KvEvents,
  KvEventsReplay,
  KvEventsTopic
};

struct Spec {
  Arg arg;
  bool takes_value;
};

// Every flag Ollama passes (SPEC 5) and a few common neighbours. Flags that tune llama.cpp internals with no
// kvtrie equivalent are accepted and ignored, each with a log line.
const std::map<std::string, Spec>& specs() {
  static const std::map<std::string, Spec> table = {
      {"--model", {Arg::Model, true}},
      {"-m", {Arg::Model, true}},
      {"--port", {Arg::Port, true}},
      {"--host", {Arg::Host, true}},
      {"--ctx-size", {Arg::Ctx, true}},
      {"-c", {Arg::Ctx, true}},
      {"--parallel", {Arg::Parallel, true}},
      {"-np", {Arg::Parallel, true}},
      {"--log-verbosity", {Arg::Verbosity, true}},
      {"-lv", {Arg::Verbosity, true}},
      {"--chat-template", {Arg::ChatTemplate, true}},
      {"--max-body-mb", {Arg::MaxBodyMb, true}},  // kvtrie's own: the body limit, as in `kvtrie serve`
      // llama.cpp's spellings, with kvtrie's meaning (docs/security.md): the key file may name tenants
      // and admin keys, and /metrics needs a key unless --metrics-public (kvtrie's own) is given.
      {"--api-key", {Arg::ApiKey, true}},
      {"--api-key-file", {Arg::ApiKeyFile, true}},
      {"--ssl-cert-file", {Arg::SslCertFile, true}},
      {"--ssl-key-file", {Arg::SslKeyFile, true}},
      {"--metrics-public", {Arg::MetricsPublic, false}},
      // kvtrie's own, as in `kvtrie serve`: replicas run as llama-server behind a prefix-aware router.
      {"--kv-events", {Arg::KvEvents, true}},
      {"--kv-events-replay", {Arg::KvEventsReplay, true}},
      {"--kv-events-topic", {Arg::KvEventsTopic, true}},
      {"--verbose", {Arg::Verbose, false}},
      {"-v", {Arg::Verbose, false}},
      {"--list-devices", {Arg::ListDevices, false}},
      {"--no-log-prefix", {Arg::NoLogPrefix, false}},
      {"--no-log-timestamps", {Arg::NoLogTimestamps, false}},
      {"--help", {Arg::Help, false}},
      {"-h", {Arg::Help, false}},
      {"--version", {Arg::Version, false}},
      {"--flash-attn", {Arg::FlashAttn, false}},
      {"-fa", {Arg::FlashAttn, false}},
      {"--n-gpu-layers", {Arg::IgnoredValue, true}},
      {"-ngl", {Arg::IgnoredValue, true}},
      {"--gpu-layers", {Arg::IgnoredValue, true}},
      {"--threads", {Arg::IgnoredValue, true}},
      {"-t", {Arg::IgnoredValue, true}},
      {"--threads-batch", {Arg::IgnoredValue, true}},
      {"-tb", {Arg::IgnoredValue, true}},
      {"--batch-size", {Arg::BatchSize, true}},
      {"-b", {Arg::BatchSize, true}},
      {"--ubatch-size", {Arg::IgnoredValue, true}},
      {"-ub", {Arg::IgnoredValue, true}},
      {"--cache-type-k", {Arg::IgnoredValue, true}},
      {"-ctk", {Arg::IgnoredValue, true}},
      {"--cache-type-v", {Arg::IgnoredValue, true}},
      {"-ctv", {Arg::IgnoredValue, true}},
      {"--keep", {Arg::IgnoredValue, true}},
      {"--alias", {Arg::IgnoredValue, true}},
      {"-a", {Arg::IgnoredValue, true}},
      {"--timeout", {Arg::IgnoredValue, true}},
      {"--main-gpu", {Arg::IgnoredValue, true}},
      {"--tensor-split", {Arg::IgnoredValue, true}},
      {"--split-mode", {Arg::IgnoredValue, true}},
      {"--no-webui", {Arg::IgnoredFlag, false}},
      {"--offline", {Arg::IgnoredFlag, false}},
      {"--jinja", {Arg::IgnoredFlag, false}},
      {"--no-jinja", {Arg::IgnoredFlag, false}},
      {"--context-shift", {Arg::IgnoredFlag, false}},
      {"--no-context-shift", {Arg::IgnoredFlag, false}},
      {"--no-mmap", {Arg::IgnoredFlag, false}},
      {"--mlock", {Arg::IgnoredFlag, false}},
      {"--cont-batching", {Arg::IgnoredFlag, false}},
      {"--no-warmup", {Arg::IgnoredFlag, false}},
      {"--metrics", {Arg::IgnoredFlag, false}},
      {"--no-kv-offload", {Arg::IgnoredFlag, false}},
  };
  return table;
}

template <typename T>
bool to_uint(const std::string& s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string level_for_verbosity(int v) {
  if (v <= 1) return "error";
  if (v == 2) return "warn";
  if (v == 3) return "info";
  return "debug";
}

}  // namespace

std::variant<LlamaServerArgs, std::string> parse_llama_server_args(const std::vector<std::string>& args) {
  LlamaServerArgs out;
  out.options.mode = ApiMode::LlamaServer;
  out.options.port = 8080;  // llama-server's default
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> value;
    if (size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    }
    auto it = specs().find(flag);
    // The flag's name only: a mistyped --api-key=SECRET must not print the secret.
    if (it == specs().end())
      return "unknown argument: " + flag +
             " (kvtrie's llama-server mode accepts the flags Ollama uses; see docs/ollama.md)";
    const Spec spec = it->second;
    if (spec.takes_value && !value) {
      if (i + 1 >= args.size()) return "argument " + flag + " needs a value";
      value = args[++i];
    }
    if (spec.arg == Arg::FlashAttn && !value && i + 1 < args.size() &&
        (args[i + 1] == "on" || args[i + 1] == "off" || args[i + 1] == "auto"))
      value = args[++i];
    const std::string v = value.value_or("");
    auto bad = [&] { return "invalid value \"" + v + "\" for " + flag; };
    switch (spec.arg) {
      case Arg::Model:
        out.options.model = v;
        break;
      case Arg::Port:
        if (!to_uint(v, out.options.port)) return bad();
        break;
      case Arg::Host:
        out.options.host = v;
        break;
      case Arg::Ctx:
        if (!to_uint(v, out.options.ctx_size)) return bad();
        break;
      case Arg::Parallel:
        if (!to_uint(v, out.options.parallel) || out.options.parallel == 0) return bad();
        break;
      case Arg::Verbosity: {
        unsigned level = 0;
        if (!to_uint(v, level)) return bad();
        out.options.log_level = level_for_verbosity(static_cast<int>(level));
        break;
      }
      case Arg::ChatTemplate:
        out.options.chat_template = v;
        break;
      case Arg::BatchSize:  // llama-server's logical batch: tokens of one forward pass (--batch-tokens)
        if (!to_uint(v, out.options.batch_tokens) || out.options.batch_tokens < engine::kMinBatchTokens ||
            out.options.batch_tokens > engine::kMaxBatchTokens)
          return bad();
        break;
      case Arg::MaxBodyMb:
        if (!to_uint(v, out.options.max_body_mb) || out.options.max_body_mb == 0 ||
            out.options.max_body_mb > 1024)
          return bad();
        break;
      case Arg::ApiKey:
        // llama.cpp takes several keys separated by commas in one value.
        for (size_t at = 0; at <= v.size();) {
          const size_t comma = std::min(v.find(',', at), v.size());
          if (comma > at) out.options.api_keys.push_back(v.substr(at, comma - at));
          at = comma + 1;
        }
        break;
      case Arg::ApiKeyFile:
        out.options.api_key_file = v;
        break;
      case Arg::SslCertFile:
        out.options.ssl_cert_file = v;
        break;
      case Arg::SslKeyFile:
        out.options.ssl_key_file = v;
        break;
      case Arg::MetricsPublic:
        out.options.metrics_public = true;
        break;
      case Arg::KvEvents:
        out.options.kv_events = v;
        break;
      case Arg::KvEventsReplay:
        out.options.kv_events_replay = v;
        break;
      case Arg::KvEventsTopic:
        out.options.kv_events_topic = v;
        break;
      case Arg::Verbose:
        out.options.verbose = true;
        break;
      case Arg::ListDevices:
        out.list_devices = true;
        break;
      case Arg::NoLogPrefix:
      case Arg::NoLogTimestamps:
        out.log_prefix = false;
        break;
      case Arg::Help:
        out.help = true;
        break;
      case Arg::Version:
        out.version = true;
        break;
      case Arg::FlashAttn:
        if (value && v != "on" && v != "off" && v != "auto") return bad();
        out.ignored.push_back(flag + (value ? " " + v : ""));
        break;
      case Arg::IgnoredValue:
        out.ignored.push_back(flag + " " + v);
        break;
      case Arg::IgnoredFlag:
        out.ignored.push_back(flag);
        break;
    }
  }
  return out;
}

int run_llama_server(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = parse_llama_server_args(args);
  if (auto* err = std::get_if<std::string>(&parsed)) {
    std::cerr << "error: " << *err << '\n';
    return 2;
  }
  LlamaServerArgs& a = std::get<LlamaServerArgs>(parsed);
  if (a.help) {
    std::cout
        << "llama-server (kvtrie " << KVTRIE_VERSION << " compatibility mode)\n"
        << "usage: llama-server --model PATH [--port N] [--host H] [-c CTX] [-np N] [--chat-template NAME]\n"
        << "       [--max-body-mb N (1-1024, default 8: the largest request body)]\n"
        << "       [--api-key KEY[,KEY...]] [--api-key-file FILE] [--metrics-public]\n"
        << "       [--ssl-cert-file PEM --ssl-key-file PEM]\n"
        << "       [--list-devices] [--verbose]; llama.cpp tuning flags Ollama passes are accepted and "
           "ignored.\n";
    return 0;
  }
  if (a.version) {
    std::cout << "version: kvtrie " << KVTRIE_VERSION << " (llama-server compatible)\n";
    return 0;
  }
  if (a.list_devices) return list_devices();
  setup_logging(a.options.log_level, a.log_prefix);
  spdlog::info("kvtrie {} in llama-server compatibility mode", KVTRIE_VERSION);
  for (const auto& note : a.ignored) spdlog::info("ignoring {} (does not apply to kvtrie)", note);
  return run_daemon(a.options);
}

}  // namespace kvtrie::server
