// Contract: the daemon's config file: "key = value" lines, '#' comments, blank lines; keys are the long
// option names of `kvtrie serve` without the dashes (port = 11435). read_config_file() returns the pairs in
// file order or an error naming the file and line; it does not know which keys exist (the CLI checks).
// Pure function; any thread.
#pragma once
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kvtrie::server {

using ConfigEntries = std::vector<std::pair<std::string, std::string>>;

// The entries, or an error message.
std::variant<ConfigEntries, std::string> read_config_file(const std::string& path);

inline constexpr const char* kDefaultConfigPath = "/etc/kvtrie/kvtrie.conf";

}  // namespace kvtrie::server
