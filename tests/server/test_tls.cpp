// Direct TLS on the real daemon: with --ssl-cert-file and --ssl-key-file (a self-signed certificate the test
// makes with the openssl command) a request over https, verified against that certificate, succeeds, and
// plain http to the same port gets no answer; half a TLS configuration or a broken certificate is refused.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tests/server/daemon_process.h"

namespace kvtrie::test {
namespace {

using nlohmann::json;

// A self-signed certificate for 127.0.0.1 (and localhost) and its key, or false when openssl is missing.
bool make_certificate(const std::filesystem::path& cert, const std::filesystem::path& key) {
  const std::string cmd =
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key.string() + " -out " + cert.string() + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

TEST(Tls, HttpsWithASelfSignedCertificateSucceedsAndPlainHttpFails) {
  const auto cert = scratch_dir() / "cert.pem";
  const auto key = scratch_dir() / "key.pem";
  if (!make_certificate(cert, key)) GTEST_SKIP() << "the openssl command is not available";
  const auto model = tiny_model(scratch_dir()).string();
  const int port = free_port();
  DaemonProcess d({"serve", "--model", model, "--port", std::to_string(port), "--cpu-reference", "--ctx-size",
                   "256", "--ssl-cert-file", cert.string(), "--ssl-key-file", key.string(), "--api-key",
                   "sk-tls-1"});
  httplib::SSLClient https("127.0.0.1", port);
  https.set_ca_cert_path(cert.c_str());
  https.enable_server_certificate_verification(true);
  bool ready = false;
  for (int i = 0; i < 400 && !ready && !d.has_exited(); ++i) {
    auto r = https.Get("/health");
    ready = r && r->status == 200;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(ready) << d.log();
  auto gen = https.Post(
      "/generate", {{"Authorization", "Bearer sk-tls-1"}},
      json({{"prompt", "Hello"}, {"max_tokens", 3}, {"ignore_eos", true}, {"stream", false}}).dump(),
      "application/json");
  ASSERT_TRUE(gen) << httplib::to_string(gen.error());
  EXPECT_EQ(gen->status, 200) << gen->body;
  EXPECT_EQ(json::parse(gen->body)["completion_tokens"], 3);

  // Plain HTTP to the TLS port: the handshake fails and the connection closes, with no HTTP answer.
  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(5, 0);
  auto r = plain.Get("/health");
  EXPECT_FALSE(r && r->status == 200) << "plain http was served on the TLS port";
  // The daemon is unharmed.
  EXPECT_TRUE(https.Get("/health")) << d.log();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(20)), 0) << d.log();
  EXPECT_NE(d.log().find("listening on https://"), std::string::npos) << d.log();
}

TEST(Tls, HalfAConfigurationOrABrokenCertificateIsRefused) {
  const auto model = tiny_model(scratch_dir()).string();
  const auto junk = scratch_dir() / "junk.pem";
  std::ofstream(junk) << "not a certificate\n";
  DaemonProcess half({"serve", "--model", model, "--port", std::to_string(free_port()), "--cpu-reference",
                      "--ssl-cert-file", junk.string()});
  EXPECT_EQ(half.wait_exit(std::chrono::seconds(10)), 1) << half.log();
  EXPECT_NE(half.log().find("go together"), std::string::npos) << half.log();
  DaemonProcess broken({"serve", "--model", model, "--port", std::to_string(free_port()), "--cpu-reference",
                        "--ssl-cert-file", junk.string(), "--ssl-key-file", junk.string()});
  EXPECT_EQ(broken.wait_exit(std::chrono::seconds(10)), 1) << broken.log();
  EXPECT_NE(broken.log().find("cannot load the TLS certificate"), std::string::npos) << broken.log();
}

}  // namespace
}  // namespace kvtrie::test
