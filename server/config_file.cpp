#include "server/config_file.h"

#include <fstream>

namespace kvtrie::server {

namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\r";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::variant<ConfigEntries, std::string> read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "cannot read config file " + path;
  ConfigEntries out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::string t = trim(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    size_t eq = t.find('=');
    if (eq == std::string::npos)
      return path + ":" + std::to_string(n) + ": expected \"key = value\", got \"" + t + "\"";
    std::string key = trim(t.substr(0, eq));
    std::string value = trim(t.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    if (key.empty()) return path + ":" + std::to_string(n) + ": empty key";
    out.emplace_back(key, value);
  }
  return out;
}

}  // namespace kvtrie::server
