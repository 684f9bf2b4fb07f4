// libFuzzer target: the disk tier's page files (cache/disk_page_file.h), read with read_page_file (through a
// memfd) or by a DiskPageStore opened on a directory holding the file under the page's name, and every input
// as a name to parse_page_file_name. The first three bytes give the page's shape and identity, and may ask
// for the checksums to be recomputed (fuzz/disk_page_input.h). Checks: a read is Ok exactly when the file is,
// byte for byte, what write_page_file writes for that identity and KV bytes (written in a scratch directory
// for every input of the page's size), and then it hands out the file's KV bytes; a damaged file is reported
// as truncated, corrupt or foreign, never as missing or unreadable; the store loads the page or removes the
// file (at open when its size is wrong, at the load otherwise); an accepted name is page_file_name() of what
// it parsed to, and page_file_name() parses back. Nothing may throw. A failed check aborts, which libFuzzer
// reports as a crash. Seeds: page files written by write_page_file, a truncated and a foreign one, names.
#include <stdlib.h>
#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "cache/disk_page_file.h"
#include "cache/disk_page_store.h"
#include "fuzz/disk_page_input.h"
#include "fuzz/fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using kvtrie::PageFileIdentity;
using kvtrie::PageFileStatus;
using kvtrie::PageHash;
using kvtrie::TokenId;

// The header's layout (disk_page_file.cpp): where the fingerprint, the hash and the two checksums are.
constexpr std::size_t kFingerprintAt = 16, kHashAt = 24, kBodyChecksumAt = 40, kHeaderChecksumAt = 56;
const std::size_t kHeaderBytes = kvtrie::page_file_bytes(0, 0);

void check(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "fuzz_disk_page: %s\n", what);
    std::abort();
  }
}

std::uint64_t load64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A private directory for the expected files and the store, removed at exit.
struct Scratch {
  fs::path expected, store;
  Scratch() {
    std::string root = (fs::temp_directory_path() / "kvtrie-fuzz-disk-XXXXXX").string();
    if (mkdtemp(root.data()) == nullptr) std::abort();
    expected = fs::path(root) / "expected";
    store = fs::path(root) / "store";
    fs::create_directory(expected);
    fs::create_directory(store);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(expected.parent_path(), ec);
  }
};

std::vector<std::uint8_t> read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void check_names(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  std::uint64_t fingerprint = 0;
  PageHash hash = 0;
  if (kvtrie::parse_page_file_name(name, fingerprint, hash))
    check(kvtrie::page_file_name(fingerprint, hash) == name, "an accepted name is not the name of its parse");
  if (size >= 16) {
    const std::uint64_t f = load64(data);
    const PageHash h = load64(data + 8);
    check(kvtrie::parse_page_file_name(kvtrie::page_file_name(f, h), fingerprint, hash) && fingerprint == f &&
              hash == h,
          "page_file_name() does not parse back");
  }
}

// The file under the page's name in the store's directory, a store opened on it, one load: Ok, or the file is
// gone (a store removes what it refuses).
kvtrie::DiskLoadStatus load_through_store(const Scratch& scratch, const std::vector<std::uint8_t>& file,
                                          const PageFileIdentity& id, std::span<std::byte> out) {
  const fs::path path = scratch.store / kvtrie::page_file_name(id.fingerprint, id.hash);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  kvtrie::DiskPageStoreConfig config;
  config.dir = scratch.store;
  config.budget_bytes = std::uint64_t{1} << 30;
  config.fingerprint = id.fingerprint;
  config.page_tokens = static_cast<std::uint32_t>(id.tokens.size());
  config.page_bytes = id.page_bytes;
  config.reader_threads = 1;
  kvtrie::DiskLoadStatus status;
  {
    kvtrie::DiskPageStore store(config);
    check(store.enabled(), "the store did not open on its scratch directory");
    status = store.load(id.hash, id.tokens, out);
  }
  std::error_code ec;
  const bool kept = fs::remove(path, ec);
  check((status == kvtrie::DiskLoadStatus::Ok) == kept, "the store kept a file it did not load, or lost one");
  return status;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kvtrie::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace kf = kvtrie::fuzz;
  static const Scratch scratch;
  static kf::MemFile mem;
  check_names(data, size);
  if (size < kf::kDiskPrefixBytes) return 0;
  const std::uint8_t flags = data[0];
  const std::uint32_t page_tokens = flags & 15;
  const std::size_t page_bytes = (data[1] | std::size_t{data[2]} << 8) % (kf::kDiskMaxPageBytes + 1);
  std::vector<std::uint8_t> file(data + kf::kDiskPrefixBytes, data + size);
  const bool page_sized = file.size() == kvtrie::page_file_bytes(page_tokens, page_bytes);
  const std::size_t kv_at = kHeaderBytes + page_tokens * sizeof(TokenId);

  if ((flags & kf::kDiskFixChecksums) && file.size() >= kHeaderBytes) {
    const std::uint64_t body = XXH3_64bits(file.data() + kHeaderBytes, file.size() - kHeaderBytes);
    std::memcpy(file.data() + kBodyChecksumAt, &body, sizeof body);
    const std::uint64_t header = XXH3_64bits(file.data(), kHeaderChecksumAt);
    std::memcpy(file.data() + kHeaderChecksumAt, &header, sizeof header);
  }
  PageFileIdentity id{kf::kDiskFingerprint, kf::kDiskHash, {}, page_bytes};
  std::vector<TokenId> tokens = kf::disk_fixed_tokens(page_tokens);
  if ((flags & kf::kDiskIdentityFromFile) && page_sized) {
    id.fingerprint = load64(file.data() + kFingerprintAt);
    id.hash = load64(file.data() + kHashAt);
    if (page_tokens > 0)
      std::memcpy(tokens.data(), file.data() + kHeaderBytes, page_tokens * sizeof(TokenId));
  }
  id.tokens = tokens;

  // The oracle: the file write_page_file writes for this identity and the KV bytes the input holds.
  std::span<const std::byte> kv;
  bool is_page = false;
  if (page_sized) {
    kv = {reinterpret_cast<const std::byte*>(file.data()) + kv_at, page_bytes};
    check(kvtrie::write_page_file(scratch.expected, id, kv).ok(),
          "write_page_file failed in the scratch dir");
    const fs::path written = scratch.expected / kvtrie::page_file_name(id.fingerprint, id.hash);
    is_page = read_whole(written) == file;
    fs::remove(written);
  }

  std::vector<std::byte> out(page_bytes);
  bool ok;
  if ((flags & kf::kDiskThroughStore) && page_tokens > 0 && page_bytes > 0) {
    // DiskPageStore holds pages of at least one token and one byte.
    const kvtrie::DiskLoadStatus status = load_through_store(scratch, file, id, out);
    check(status == (page_sized ? (is_page ? kvtrie::DiskLoadStatus::Ok : kvtrie::DiskLoadStatus::Refused)
                                : kvtrie::DiskLoadStatus::Missing),
          "the store neither loaded the page, refused it at the load, nor removed it at open");
    ok = status == kvtrie::DiskLoadStatus::Ok;
  } else {
    const kvtrie::PageFileResult result =
        kvtrie::read_page_file(mem.write(file.data(), file.size()), id, out);
    check(result.ok() == result.message.empty(), "a message exactly when the read failed");
    check(result.status != PageFileStatus::Missing && result.status != PageFileStatus::IoError,
          "a damaged file reported as missing or unreadable");
    check(page_sized || result.status == PageFileStatus::Truncated, "a file of the wrong size not truncated");
    ok = result.ok();
  }
  check(ok == is_page,
        ok ? "Ok for a file write_page_file does not write" : "refused what write_page_file wrote");
  if (ok) check(std::equal(out.begin(), out.end(), kv.begin(), kv.end()), "Ok but not the file's KV bytes");
  return 0;
}
