// Contract: the daemon's API keys as data: a key is kept only as its SHA-256 digest, with its tenant name and
// whether it may call admin endpoints. parse_key_file_text() reads the key file format (one key per line:
// `KEY [TENANT] [admin]`; '#' comment lines and blank lines skipped); its error messages name the source and
// line but never quote a line, since every line holds a key. find_key() looks a presented key up in constant
// time over the whole table. Pure functions and plain values; any thread.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvtrie::server {

using KeyDigest = std::array<unsigned char, 32>;

struct ApiKey {
  KeyDigest digest{};
  std::string tenant;  // from the key file, else default_tenant(digest)
  bool admin = false;
};

KeyDigest digest_of(std::string_view key);

// "key-" and 12 hex digits of the key's digest: stable across restarts, distinct per key, and not the key.
std::string default_tenant(const KeyDigest& digest);

// True for names of 1 to 64 characters from [A-Za-z0-9._-] (safe in logs and Prometheus labels).
bool valid_tenant_name(std::string_view name);

// The keys given on the command line (or KVTRIE_API_KEY): user keys, each its own tenant.
std::vector<ApiKey> keys_from_values(const std::vector<std::string>& values);

// The keys of a key file's text, or an error naming `source` and the line. The last word "admin" marks an
// admin key (so `KEY admin` is an admin key of the default tenant, `KEY admin admin` one of tenant "admin").
// A key listed twice is an error.
std::variant<std::vector<ApiKey>, std::string> parse_key_file_text(const std::string& text,
                                                                   const std::string& source);
// Reads and parses the file; an unreadable file is an error too.
std::variant<std::vector<ApiKey>, std::string> read_key_file(const std::string& path);

// The index in `keys` of the key whose digest is `digest`, comparing every entry in constant time (the time
// taken depends on the table's size only, not on which key matched or how much of it).
std::optional<size_t> find_key(const std::vector<ApiKey>& keys, const KeyDigest& digest);

}  // namespace kvtrie::server
