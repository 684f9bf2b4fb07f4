// Contract: the on-disk form of one KV page of the disk tier, and the two operations on it. A page file is
// a fixed header, the page's P token ids and its KV bytes; the header names the store's fingerprint (the
// model and its KV layout) and the page's chained hash (cache/page_hash.h), and carries an XXH3-64 checksum
// of itself and one of the tokens and bytes. write_page_file() writes a temporary file (0600) and renames it
// over the final name, so a reader sees a whole file or none; a crash leaves at most a stray temporary file,
// which DiskPageStore removes. No fsync: after a power loss a renamed file may be short or zeroed, and the
// size and checksums refuse it like any other damage. read_page_file() refuses anything that is not exactly
// the expected page (wrong size, magic, version, reserved bytes, fingerprint, hash, tokens or checksum)
// and says why: an Ok file is byte for byte what write_page_file() writes for that page.
// page_file_in_memory() tells whether reading a file would touch the disk. Pure functions of their arguments
// and the file system; any thread (two threads must not write one name).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "cache/trie_node.h"

namespace kvtrie {

// What a page file must be: the store's fingerprint, the page's hash, its tokens and its size in bytes.
struct PageFileIdentity {
  std::uint64_t fingerprint = 0;
  PageHash hash = 0;
  std::span<const TokenId> tokens;  // P token ids
  std::size_t page_bytes = 0;
};

// Bytes of the file holding one page of page_tokens tokens and page_bytes bytes of KV.
std::uint64_t page_file_bytes(std::uint32_t page_tokens, std::size_t page_bytes);
// The file name (no directory) of a page: <fingerprint>-<hash>.kvpage, both 16 hex digits.
std::string page_file_name(std::uint64_t fingerprint, PageHash hash);
// Parses a name page_file_name() made; false for any other name.
bool parse_page_file_name(const std::string& name, std::uint64_t& fingerprint, PageHash& hash);
inline constexpr const char* kPageFileTempSuffix = ".tmp";

enum class PageFileStatus {
  Ok,
  Missing,    // no such file (evicted or never written)
  Truncated,  // shorter or longer than the page it should hold
  Corrupt,    // bad magic, version or checksum
  Foreign,    // a valid file of another fingerprint, hash or tokens
  IoError,    // open or read failed (errno in the message)
};
std::string_view page_file_status_name(PageFileStatus status);

struct PageFileResult {
  PageFileStatus status = PageFileStatus::Ok;
  std::string message;  // empty on Ok; else why, for the log line
  bool ok() const { return status == PageFileStatus::Ok; }
};

// Writes id.tokens and bytes (id.page_bytes of them) to dir/page_file_name() via a temporary file and a
// rename. On failure (full disk, I/O error) removes the temporary file and reports IoError.
PageFileResult write_page_file(const std::filesystem::path& dir, const PageFileIdentity& id,
                               std::span<const std::byte> bytes);
// Reads the page file at path into out (id.page_bytes bytes), checking it is exactly id's page. out's
// contents are unspecified unless the result is Ok.
PageFileResult read_page_file(const std::filesystem::path& path, const PageFileIdentity& id,
                              std::span<std::byte> out);
// Whether every byte of the file at path is in the OS page cache now (mincore over a mapping of it), so a
// read costs a memory copy rather than disk time. False when it cannot tell (no such file, empty, mapping
// failed).
bool page_file_in_memory(const std::filesystem::path& path);

}  // namespace kvtrie
