// Contract: the input layout of fuzz_disk_page, shared with the seed writer (fuzz/make_seeds.cpp) so that its
// valid page files are valid for the target. An input is three bytes, then the bytes of a page file:
//   byte 0      bits 0-3: the page's token count (0 to 15)
//               bit 4: take the identity (fingerprint, hash, tokens) from where the file holds them, when it
//                      is of the page's size, instead of the fixed one below
//               bit 5: recompute both checksums in the file before reading it, so that mutations reach the
//                      checks behind them (version, identity, reserved bytes)
//               bit 6: read it through a DiskPageStore opened on a directory holding it, not read_page_file
//   bytes 1-2   the page's KV bytes, little-endian, modulo 4097 (0 to 4096)
// Pure functions and constants; any thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/trie_node.h"

namespace kvtrie::fuzz {

inline constexpr std::uint8_t kDiskIdentityFromFile = 0x10;
inline constexpr std::uint8_t kDiskFixChecksums = 0x20;
inline constexpr std::uint8_t kDiskThroughStore = 0x40;
inline constexpr std::size_t kDiskMaxPageBytes = 4096;
inline constexpr std::size_t kDiskPrefixBytes = 3;

// The fixed identity: a fingerprint, a hash and tokens 1000, 1007, 1014, ...
inline constexpr std::uint64_t kDiskFingerprint = 0x6b76747269650001;
inline constexpr PageHash kDiskHash = 0x0123456789abcdef;
inline std::vector<TokenId> disk_fixed_tokens(std::uint32_t count) {
  std::vector<TokenId> tokens(count);
  for (std::uint32_t i = 0; i < count; ++i) tokens[i] = static_cast<TokenId>(1000 + 7 * i);
  return tokens;
}

inline std::string disk_input_prefix(std::uint8_t flags, std::uint32_t page_tokens, std::size_t page_bytes) {
  return {static_cast<char>(flags | (page_tokens & 15)), static_cast<char>(page_bytes & 0xff),
          static_cast<char>(page_bytes >> 8)};
}

}  // namespace kvtrie::fuzz
