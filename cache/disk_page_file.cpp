// The page file format (cache/disk_page_file.h): a 64-byte little-endian header, the tokens, the KV bytes.
#include "cache/disk_page_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvtrie {
namespace {

static_assert(std::endian::native == std::endian::little, "page files are defined over little-endian bytes");

constexpr std::array<char, 8> kMagic = {'K', 'V', 'T', 'R', 'P', 'A', 'G', 'E'};
constexpr std::uint32_t kVersion = 1;
constexpr const char* kSuffix = ".kvpage";

struct Header {
  std::array<char, 8> magic;
  std::uint32_t version;
  std::uint32_t page_tokens;
  std::uint64_t fingerprint;
  std::uint64_t hash;
  std::uint64_t page_bytes;
  std::uint64_t body_checksum;  // XXH3-64 of the tokens, then the KV bytes
  std::uint64_t reserved;
  std::uint64_t header_checksum;  // XXH3-64 of every byte above
};
static_assert(sizeof(Header) == 64 && std::has_unique_object_representations_v<Header>);

std::uint64_t header_checksum(const Header& h) {
  return XXH3_64bits(&h, offsetof(Header, header_checksum));
}

std::uint64_t body_checksum(std::span<const TokenId> tokens, std::span<const std::byte> bytes) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  XXH3_64bits_update(&state, bytes.data(), bytes.size());
  return XXH3_64bits_digest(&state);
}

PageFileResult failure(PageFileStatus status, std::string message) {
  return {status, std::move(message)};
}

std::string errno_text(const char* what, const std::filesystem::path& path) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(errno);
}

// Writes all of data; false with errno set on failure (a full disk is ENOSPC, a short write too).
bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const std::byte*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly the bytes of every buffer, in order, with as few system calls as the kernel allows (one for a
// whole page file: the kernel then reads ahead the full request instead of growing its window); false with
// errno set (0 at an early end of file).
bool readv_all(int fd, std::span<iovec> iov) {
  while (!iov.empty()) {
    const ssize_t n = ::readv(fd, iov.data(), static_cast<int>(iov.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    auto left = static_cast<std::size_t>(n);
    while (!iov.empty() && left >= iov.front().iov_len) {
      left -= iov.front().iov_len;
      iov = iov.subspan(1);
    }
    if (left > 0) {
      iov.front().iov_base = static_cast<std::byte*>(iov.front().iov_base) + left;
      iov.front().iov_len -= left;
    }
  }
  return true;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now (a close can report a deferred write error, e.g. on NFS); false with errno set.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

}  // namespace

std::uint64_t page_file_bytes(std::uint32_t page_tokens, std::size_t page_bytes) {
  return sizeof(Header) + std::uint64_t{page_tokens} * sizeof(TokenId) + page_bytes;
}

std::string page_file_name(std::uint64_t fingerprint, PageHash hash) {
  char name[64];
  std::snprintf(name, sizeof name, "%016llx-%016llx%s", static_cast<unsigned long long>(fingerprint),
                static_cast<unsigned long long>(hash), kSuffix);
  return name;
}

bool parse_page_file_name(const std::string& name, std::uint64_t& fingerprint, PageHash& hash) {
  const std::string_view suffix(kSuffix);
  if (name.size() != 33 + suffix.size() || name[16] != '-' || !name.ends_with(suffix)) return false;
  auto hex = [](std::string_view digits, std::uint64_t& out) {
    out = 0;
    for (char c : digits) {
      int v;
      if (c >= '0' && c <= '9')
        v = c - '0';
      else if (c >= 'a' && c <= 'f')
        v = c - 'a' + 10;
      else
        return false;
      out = out << 4 | static_cast<std::uint64_t>(v);
    }
    return true;
  };
  const std::string_view n(name);
  return hex(n.substr(0, 16), fingerprint) && hex(n.substr(17, 16), hash);
}

std::string_view page_file_status_name(PageFileStatus status) {
  switch (status) {
    case PageFileStatus::Ok:
      return "ok";
    case PageFileStatus::Missing:
      return "missing";
    case PageFileStatus::Truncated:
      return "truncated";
    case PageFileStatus::Corrupt:
      return "corrupt";
    case PageFileStatus::Foreign:
      return "foreign";
    case PageFileStatus::IoError:
      return "I/O error";
  }
  return "unknown";
}

PageFileResult write_page_file(const std::filesystem::path& dir, const PageFileIdentity& id,
                               std::span<const std::byte> bytes) {
  Header h{};
  h.magic = kMagic;
  h.version = kVersion;
  h.page_tokens = static_cast<std::uint32_t>(id.tokens.size());
  h.fingerprint = id.fingerprint;
  h.hash = id.hash;
  h.page_bytes = bytes.size();
  h.body_checksum = body_checksum(id.tokens, bytes);
  h.header_checksum = header_checksum(h);

  const std::filesystem::path final_path = dir / page_file_name(id.fingerprint, id.hash);
  std::filesystem::path temp = final_path;
  temp += kPageFileTempSuffix;
  // O_TRUNC, not O_EXCL: a temporary file left by a killed daemon under the same name is simply reused.
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (fd.get() < 0) return failure(PageFileStatus::IoError, errno_text("cannot create", temp));
  const bool written = write_all(fd.get(), &h, sizeof h) &&
                       write_all(fd.get(), id.tokens.data(), id.tokens.size_bytes()) &&
                       write_all(fd.get(), bytes.data(), bytes.size()) && fd.close();
  if (!written || std::rename(temp.c_str(), final_path.c_str()) != 0) {
    PageFileResult result = failure(PageFileStatus::IoError, errno_text("cannot write", temp));
    ::unlink(temp.c_str());
    return result;
  }
  return {};
}

PageFileResult read_page_file(const std::filesystem::path& path, const PageFileIdentity& id,
                              std::span<std::byte> out) {
  if (out.size() != id.page_bytes) return failure(PageFileStatus::IoError, "read buffer of the wrong size");
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return failure(PageFileStatus::Missing, path.string() + " is gone");
    return failure(PageFileStatus::IoError, errno_text("cannot open", path));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return failure(PageFileStatus::IoError, errno_text("cannot stat", path));
  const std::uint64_t expected = page_file_bytes(static_cast<std::uint32_t>(id.tokens.size()), id.page_bytes);
  if (static_cast<std::uint64_t>(st.st_size) != expected)
    return failure(PageFileStatus::Truncated, path.string() + " holds " + std::to_string(st.st_size) +
                                                  " bytes, a page file " + std::to_string(expected));
  Header h{};
  std::vector<TokenId> tokens(id.tokens.size());
  // The whole file in one read; the header is checked before the tokens and bytes are used.
  iovec iov[] = {{&h, sizeof h}, {tokens.data(), tokens.size() * sizeof(TokenId)}, {out.data(), out.size()}};
  if (!readv_all(fd.get(), iov)) return failure(PageFileStatus::IoError, errno_text("cannot read", path));
  if (h.magic != kMagic || h.header_checksum != header_checksum(h))
    return failure(PageFileStatus::Corrupt, path.string() + ": bad header (magic or checksum)");
  if (h.version != kVersion)
    return failure(PageFileStatus::Corrupt,
                   path.string() + ": page file version " + std::to_string(h.version));
  // write_page_file writes them as zero and a use of them would come with a new version: set bytes here,
  // under a good checksum, are a forged or foreign-written file (found by fuzz/fuzz_disk_page.cpp).
  if (h.reserved != 0) return failure(PageFileStatus::Corrupt, path.string() + ": reserved header bytes set");
  if (h.fingerprint != id.fingerprint || h.hash != id.hash || h.page_tokens != id.tokens.size() ||
      h.page_bytes != id.page_bytes)
    return failure(PageFileStatus::Foreign, path.string() + ": a page of another model, layout or prefix");
  if (h.body_checksum != body_checksum(tokens, out))
    return failure(PageFileStatus::Corrupt, path.string() + ": checksum mismatch");
  // A 64-bit hash collision (or a forged file): the page's own tokens must be the ones asked for.
  if (!std::equal(tokens.begin(), tokens.end(), id.tokens.begin(), id.tokens.end()))
    return failure(PageFileStatus::Foreign, path.string() + ": the page holds other tokens");
  return {};
}

bool page_file_in_memory(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  void* map = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) return false;
  const auto size = static_cast<std::size_t>(st.st_size);
  const auto os_page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + os_page - 1) / os_page);
  const bool known = ::mincore(map, size, resident.data()) == 0;
  ::munmap(map, size);
  return known && std::all_of(resident.begin(), resident.end(), [](unsigned char r) { return (r & 1) != 0; });
}

}  // namespace kvtrie
