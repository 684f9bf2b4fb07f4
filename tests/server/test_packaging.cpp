// Packaging: the systemd unit passes `systemd-analyze verify`, the packaged config keeps the disk KV tier in
// the unit's cache directory and the daemon accepts its keys, and CPack builds a Debian package holding the
// binary, the unit, the config, the llama-server link and the docs.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <variant>

#include "server/config_file.h"
#include "tests/support/paths.h"

namespace kvtrie::test {
namespace {

struct ShellResult {
  int status;
  std::string output;
};

ShellResult run(const std::string& cmd) {
  ShellResult r{-1, {}};
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), pipe)) r.output += buf.data();
  r.status = pclose(pipe);
  return r;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Packaging, SystemdUnitVerifies) {
  if (run("command -v systemd-analyze").status != 0) GTEST_SKIP() << "systemd-analyze is not installed";
  std::string unit = read_file(std::filesystem::path(KVTRIE_SOURCE_DIR) / "packaging/kvtrie.service");
  ASSERT_NE(unit.find("Type=notify"), std::string::npos);
  ASSERT_NE(unit.find("EnvironmentFile=-/etc/default/kvtrie"), std::string::npos);
  for (const char* key : {"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                          "Restart=on-failure", "User=kvtrie", "DeviceAllow=/dev/dri rw"})
    EXPECT_NE(unit.find(key), std::string::npos) << key;
  // The installed binary is not on this machine: point ExecStart at the one just built.
  unit = std::regex_replace(unit, std::regex("/usr/bin/kvtrie"), std::string(KVTRIE_BINARY_DIR) + "/kvtrie");
  const auto path = scratch_dir() / "kvtrie.service";
  std::ofstream(path) << unit;
  ShellResult r = run("systemd-analyze verify " + path.string());
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(Packaging, ConfigKeepsTheDiskKvTierInTheUnitsPrivateCacheDirectory) {
  const std::filesystem::path source(KVTRIE_SOURCE_DIR);
  const std::string unit = read_file(source / "packaging/kvtrie.service");
  EXPECT_NE(unit.find("\nCacheDirectory=kvtrie\n"), std::string::npos) << unit;
  EXPECT_NE(unit.find("\nCacheDirectoryMode=0700\n"), std::string::npos) << unit;
  const auto read = server::read_config_file((source / "packaging/kvtrie.conf").string());
  ASSERT_TRUE(std::holds_alternative<server::ConfigEntries>(read)) << std::get<std::string>(read);
  std::map<std::string, std::string> conf;
  for (const auto& [key, value] : std::get<server::ConfigEntries>(read)) conf[key] = value;
  EXPECT_EQ(conf["kv-disk-dir"], "/var/cache/kvtrie");  // CacheDirectory=kvtrie
  EXPECT_GT(std::stoll(conf["kv-disk-mb"]), 0);
  // The daemon knows every key the file sets: it gets as far as asking for the model.
  ShellResult r = run(std::string(KVTRIE_BINARY_DIR) + "/kvtrie serve --config " +
                      (source / "packaging/kvtrie.conf").string());
  EXPECT_EQ(r.output.find("unknown key"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--model PATH is required"), std::string::npos) << r.output;
}

TEST(Packaging, CpackBuildsADebWithEverythingInstalled) {
  const auto out = scratch_dir() / "deb";
  std::filesystem::remove_all(out);
  ShellResult r = run("cd " + std::string(KVTRIE_BINARY_DIR) + " && cpack -G DEB -B " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  std::filesystem::path deb;
  for (const auto& e : std::filesystem::directory_iterator(out))
    if (e.path().extension() == ".deb") deb = e.path();
  ASSERT_FALSE(deb.empty()) << r.output;
  ShellResult list = run("dpkg-deb -c " + deb.string());
  ASSERT_EQ(list.status, 0) << list.output;
  for (const char* file :
       {"./usr/bin/kvtrie", "./usr/lib/systemd/system/kvtrie.service", "./etc/kvtrie/kvtrie.conf",
        "./etc/default/kvtrie", "./usr/lib/kvtrie/llama-server -> ../../bin/kvtrie",
        "./usr/share/doc/kvtrie/README.md"}) {
    EXPECT_NE(list.output.find(file), std::string::npos) << file << "\n" << list.output;
  }
  ShellResult info = run("dpkg-deb -I " + deb.string());
  EXPECT_NE(info.output.find("conffiles"), std::string::npos) << info.output;
  EXPECT_NE(info.output.find("postinst"), std::string::npos) << info.output;
}

}  // namespace
}  // namespace kvtrie::test
