#include "server/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

namespace kvtrie::server {

KeyDigest digest_of(std::string_view key) {
  KeyDigest d{};
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), d.data());
  return d;
}

std::string default_tenant(const KeyDigest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name = "key-";
  for (size_t i = 0; i < 6; ++i) {
    name += kHex[digest[i] >> 4];
    name += kHex[digest[i] & 15];
  }
  return name;
}

bool valid_tenant_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::vector<ApiKey> keys_from_values(const std::vector<std::string>& values) {
  std::vector<ApiKey> keys;
  for (const auto& value : values) {
    if (value.empty()) continue;  // an empty KVTRIE_API_KEY= line means "none", not the empty key
    ApiKey k;
    k.digest = digest_of(value);
    k.tenant = default_tenant(k.digest);
    keys.push_back(std::move(k));
  }
  return keys;
}

std::variant<std::vector<ApiKey>, std::string> parse_key_file_text(const std::string& text,
                                                                   const std::string& source) {
  std::vector<ApiKey> keys;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    // The messages below say where, never what: the line holds a key.
    const std::string at = source + ":" + std::to_string(n) + ": ";
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty() || w[0][0] == '#') continue;
    ApiKey k;
    k.digest = digest_of(w[0]);
    k.admin = w.size() >= 2 && w.back() == "admin";
    const size_t named = w.size() - 1 - (k.admin ? 1 : 0);  // words left for the tenant name
    if (named > 1) return at + "expected \"KEY [TENANT] [admin]\" (" + std::to_string(w.size()) + " words)";
    k.tenant = named == 1 ? w[1] : default_tenant(k.digest);
    if (!valid_tenant_name(k.tenant))
      return at + "the tenant name must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' or '-'";
    if (find_key(keys, k.digest)) return at + "this key is listed twice";
    keys.push_back(std::move(k));
  }
  return keys;
}

std::variant<std::vector<ApiKey>, std::string> read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "cannot read the API key file " + path;
  std::stringstream text;
  text << in.rdbuf();
  return parse_key_file_text(text.str(), path);
}

std::optional<size_t> find_key(const std::vector<ApiKey>& keys, const KeyDigest& digest) {
  // No early exit and no data-dependent branch: every entry is compared in full, and the first match is
  // selected with masks.
  size_t found = 0;
  size_t matched = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t equal =
        static_cast<size_t>(CRYPTO_memcmp(keys[i].digest.data(), digest.data(), digest.size()) == 0);
    const size_t mask = ~(equal - 1);            // all ones when equal
    found |= i & mask & ~(size_t{0} - matched);  // only while nothing matched before
    matched |= equal;
  }
  if (!matched) return std::nullopt;
  return found;
}

}  // namespace kvtrie::server
