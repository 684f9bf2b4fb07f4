// The API key file format and the Authenticator's gate, without a daemon: who is admitted to which Access
// class, under which tenant and salt, what a reload changes and keeps, and that no message quotes a key.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "server/api_keys.h"
#include "server/authenticator.h"
#include "tests/support/paths.h"

namespace kvtrie::server {
namespace {

std::vector<ApiKey> parse_ok(const std::string& text) {
  auto parsed = parse_key_file_text(text, "keys.txt");
  EXPECT_TRUE(std::holds_alternative<std::vector<ApiKey>>(parsed)) << std::get<std::string>(parsed);
  return std::holds_alternative<std::vector<ApiKey>>(parsed) ? std::get<std::vector<ApiKey>>(parsed)
                                                             : std::vector<ApiKey>{};
}

std::string parse_error(const std::string& text) {
  auto parsed = parse_key_file_text(text, "keys.txt");
  EXPECT_TRUE(std::holds_alternative<std::string>(parsed));
  return std::holds_alternative<std::string>(parsed) ? std::get<std::string>(parsed) : "";
}

TEST(KeyFile, ParsesKeysTenantsAdminFlagsCommentsAndBlankLines) {
  const auto keys = parse_ok(
      "# operators\n\n  sk-alice  alice\nsk-ops ops admin\n\tsk-anon\nsk-root admin\nsk-t admin admin\n");
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(keys[0].tenant, "alice");
  EXPECT_FALSE(keys[0].admin);
  EXPECT_EQ(keys[0].digest, digest_of("sk-alice"));
  EXPECT_EQ(keys[1].tenant, "ops");
  EXPECT_TRUE(keys[1].admin);
  EXPECT_EQ(keys[2].tenant, default_tenant(digest_of("sk-anon")));
  EXPECT_FALSE(keys[2].admin);
  EXPECT_EQ(keys[3].tenant, default_tenant(digest_of("sk-root")));  // "KEY admin": an admin key, own tenant
  EXPECT_TRUE(keys[3].admin);
  EXPECT_EQ(keys[4].tenant, "admin");
  EXPECT_TRUE(keys[4].admin);
}

TEST(KeyFile, ErrorsNameTheLineButNeverQuoteIt) {
  const std::string too_many = parse_error("sk-good\nsk-secret-1 a b admin\n");
  EXPECT_NE(too_many.find("keys.txt:2:"), std::string::npos) << too_many;
  EXPECT_EQ(too_many.find("sk-secret-1"), std::string::npos) << too_many;
  const std::string bad_name = parse_error("sk-secret-2 bad/name\n");
  EXPECT_NE(bad_name.find("keys.txt:1:"), std::string::npos) << bad_name;
  EXPECT_EQ(bad_name.find("sk-secret-2"), std::string::npos) << bad_name;
  const std::string twice = parse_error("sk-secret-3 a\n# again\nsk-secret-3 b\n");
  EXPECT_NE(twice.find("keys.txt:3:"), std::string::npos) << twice;
  EXPECT_EQ(twice.find("sk-secret-3"), std::string::npos) << twice;
}

TEST(KeyFile, DefaultTenantIsDerivedFromTheKeyAndIsNotTheKey) {
  const std::string tenant = default_tenant(digest_of("sk-0123456789abcdef"));
  EXPECT_EQ(tenant.rfind("key-", 0), 0u);
  EXPECT_EQ(tenant.size(), 16u);
  EXPECT_TRUE(valid_tenant_name(tenant));
  EXPECT_EQ(tenant.find("0123456789"), std::string::npos);
  EXPECT_EQ(tenant, default_tenant(digest_of("sk-0123456789abcdef")));
  EXPECT_NE(tenant, default_tenant(digest_of("sk-0123456789abcdeg")));
}

TEST(KeyFile, FindKeyFindsEachKeyAndNothingElse) {
  const auto keys = parse_ok("k0\nk1\nk2\nk3\n");
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string key =
        std::string("k") + std::to_string(i);  // "k" + to_string(i): GCC 12 -Wrestrict at -O3
    EXPECT_EQ(find_key(keys, digest_of(key)), i);
  }
  EXPECT_EQ(find_key(keys, digest_of("k4")), std::nullopt);
  EXPECT_EQ(find_key(keys, digest_of("")), std::nullopt);
  EXPECT_EQ(find_key({}, digest_of("k0")), std::nullopt);
}

HttpRequest with_header(const std::string& name, const std::string& value,
                        const std::string& path = "/generate") {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.headers.emplace(name, value);
  return r;
}

int status(const std::optional<HttpResponse>& r) {
  return r ? r->status : 200;
}

class Gate : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = test::scratch_dir() / "gate-keys.txt";
    write("sk-alice alice\nsk-alice-2 alice\nsk-bob bob\nsk-ops ops admin\n");
  }
  void write(const std::string& text) { std::ofstream(file_) << text; }
  Authenticator& make(AuthOptions o) {
    auth_ = std::make_unique<Authenticator>(std::move(o));
    std::string message;
    EXPECT_TRUE(auth_->reload(message)) << message;
    return *auth_;
  }
  std::filesystem::path file_;
  std::unique_ptr<Authenticator> auth_;
};

TEST_F(Gate, AdmitsEachAccessClassOnlyWithTheRightKey) {
  Authenticator& auth = make({{"sk-cli"}, file_.string(), false});
  ASSERT_TRUE(auth.enabled());
  HttpRequest none;
  none.path = "/generate";
  EXPECT_EQ(status(auth.admit(none, Access::Public)), 200);
  EXPECT_EQ(status(auth.admit(none, Access::User)), 401);
  EXPECT_EQ(status(auth.admit(none, Access::Metrics)), 401);
  auto wrong = with_header("Authorization", "Bearer sk-wrong-key");
  const auto refused = auth.admit(wrong, Access::User);
  ASSERT_EQ(status(refused), 401);
  EXPECT_EQ(refused->body.find("sk-wrong-key"), std::string::npos) << refused->body;
  EXPECT_EQ(nlohmann::json::parse(refused->body)["error"]["type"], "authentication_error");
  // The scheme and the header names in any case; x-api-key as well as Authorization.
  auto bearer = with_header("authorization", "bearer   sk-alice ");
  EXPECT_EQ(status(auth.admit(bearer, Access::User)), 200);
  EXPECT_EQ(bearer.caller.tenant, "alice");
  EXPECT_FALSE(bearer.caller.admin);
  auto x_api_key = with_header("X-Api-Key", "sk-bob");
  EXPECT_EQ(status(auth.admit(x_api_key, Access::Metrics)), 200);
  EXPECT_EQ(x_api_key.caller.tenant, "bob");
  auto basic = with_header("Authorization", "Basic sk-alice");
  EXPECT_EQ(status(auth.admit(basic, Access::User)), 401);
  auto cli = with_header("x-api-key", "sk-cli");
  EXPECT_EQ(status(auth.admit(cli, Access::User)), 200);
  EXPECT_EQ(cli.caller.tenant, default_tenant(digest_of("sk-cli")));
  // Admin routes: 403 for a valid user key, admitted for the admin key.
  auto user_flush = with_header("x-api-key", "sk-alice", "/cache/flush");
  const auto forbidden = auth.admit(user_flush, Access::Admin);
  EXPECT_EQ(status(forbidden), 403);
  EXPECT_EQ(forbidden->body.find("sk-alice"), std::string::npos);
  auto admin_flush = with_header("x-api-key", "sk-ops", "/cache/flush");
  EXPECT_EQ(status(auth.admit(admin_flush, Access::Admin)), 200);
  EXPECT_TRUE(admin_flush.caller.admin);
  EXPECT_EQ(auth.tenant_requests().at("alice"), 1u);
  EXPECT_EQ(auth.refused(), 5u);
}

TEST_F(Gate, TenantsGetDistinctSaltsThatSurviveAReload) {
  Authenticator& auth = make({{}, file_.string(), false});
  auto a1 = with_header("x-api-key", "sk-alice");
  auto a2 = with_header("x-api-key", "sk-alice-2");
  auto b = with_header("x-api-key", "sk-bob");
  ASSERT_EQ(status(auth.admit(a1, Access::User)) + status(auth.admit(a2, Access::User)) +
                status(auth.admit(b, Access::User)),
            600);
  EXPECT_NE(a1.caller.tenant_salt, 0u);
  EXPECT_EQ(a1.caller.tenant_salt, a2.caller.tenant_salt);
  EXPECT_NE(a1.caller.tenant_salt, b.caller.tenant_salt);
  // A reload that drops one of alice's keys and adds a third key keeps her salt (and her cached prefixes).
  write("sk-alice-3 alice\nsk-bob bob\n");
  std::string message;
  ASSERT_TRUE(auth.reload(message)) << message;
  auto a3 = with_header("x-api-key", "sk-alice-3");
  EXPECT_EQ(status(auth.admit(a3, Access::User)), 200);
  EXPECT_EQ(a3.caller.tenant_salt, a1.caller.tenant_salt);
  auto old = with_header("x-api-key", "sk-alice");
  EXPECT_EQ(status(auth.admit(old, Access::User)), 401);
}

TEST_F(Gate, ABrokenKeyFileKeepsTheKeysAndAnEmptyOneClosesEverything) {
  Authenticator& auth = make({{}, file_.string(), false});
  write("sk-new one two three\n");
  std::string message;
  EXPECT_FALSE(auth.reload(message));
  EXPECT_EQ(message.find("sk-new"), std::string::npos) << message;
  auto alice = with_header("x-api-key", "sk-alice");
  EXPECT_EQ(status(auth.admit(alice, Access::User)), 200);
  write("# every key revoked\n");
  ASSERT_TRUE(auth.reload(message)) << message;
  EXPECT_TRUE(auth.enabled());
  EXPECT_EQ(status(auth.admit(alice, Access::User)), 401);
  HttpRequest health;
  EXPECT_EQ(status(auth.admit(health, Access::Public)), 200);
}

TEST_F(Gate, WithoutKeysEverythingIsOpenAndMetricsPublicOpensOnlyMetrics) {
  Authenticator& open = make({});
  EXPECT_FALSE(open.enabled());
  HttpRequest r;
  EXPECT_EQ(status(open.admit(r, Access::Admin)), 200);
  EXPECT_EQ(r.caller.tenant_salt, 0u);  // the namespace every request had before tenants
  EXPECT_FALSE(make({{""}, "", false}).enabled()) << "KVTRIE_API_KEY= (empty) locked every endpoint";
  Authenticator& metrics = make({{"sk-cli"}, "", true});
  HttpRequest anon;
  EXPECT_EQ(status(metrics.admit(anon, Access::Metrics)), 200);
  EXPECT_EQ(status(metrics.admit(anon, Access::User)), 401);
}

}  // namespace
}  // namespace kvtrie::server
