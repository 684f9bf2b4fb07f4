#include "kernels/vk/pipeline_cache_file.h"

#include <unistd.h>
#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

#include "kernels/vk/device.h"
#include "kernels/vk/shader_registry.h"

namespace kvtrie::vk {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'T', 'P', 'C', 'F', '0', '1'};
// magic, vendor, device, driver, uuid, build hash, data size, data hash
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 4 + 16 + 8 + 8 + 8;

// A word-at-a-time multiply-xorshift hash: fast enough for megabytes of cache data, and any flipped or
// missing byte changes it (corruption detection, not security).
class Hasher {
 public:
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    mix(tail ^ (uint64_t{n - i} << 56));
    mix(n);
  }
  uint64_t value() const { return h_ ^ (h_ >> 29); }

 private:
  void mix(uint64_t w) {
    h_ = (h_ ^ w) * 0x100000001b3ull;
    h_ ^= h_ >> 32;
    h_ *= 0x9e3779b97f4a7c15ull;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

uint64_t hash_bytes(std::span<const std::byte> data) {
  Hasher h;
  h.add(data.data(), data.size());
  return h.value();
}

template <typename T>
void put(std::vector<std::byte>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}
template <typename T>
T get(const std::byte*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

std::vector<std::byte> header(const PipelineCacheIdentity& id, std::span<const std::byte> data) {
  std::vector<std::byte> out;
  out.reserve(kHeaderBytes);
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  put(out, id.vendor_id);
  put(out, id.device_id);
  put(out, id.driver_version);
  put(out, id.cache_uuid);
  put(out, id.build_hash);
  put(out, static_cast<uint64_t>(data.size()));
  put(out, hash_bytes(data));
  return out;
}

std::string hex(uint64_t v, int digits) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t embedded_spirv_hash() {
  static const uint64_t hash = [] {
    Hasher h;
    for (const SpirvBlob* blob : all_spirv_blobs()) {
      h.add(blob->name, std::strlen(blob->name));
      h.add(blob->words, blob->word_count * sizeof(uint32_t));
    }
    return h.value();
  }();
  return hash;
}

PipelineCacheIdentity pipeline_cache_identity(const Device& device) {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(device.physical(), &props);
  PipelineCacheIdentity id;
  id.vendor_id = props.vendorID;
  id.device_id = props.deviceID;
  id.driver_version = props.driverVersion;
  std::memcpy(id.cache_uuid.data(), props.pipelineCacheUUID, VK_UUID_SIZE);
  id.build_hash = embedded_spirv_hash();
  return id;
}

std::string pipeline_cache_file_name(const PipelineCacheIdentity& id) {
  std::string uuid;
  for (uint8_t b : id.cache_uuid) uuid += hex(b, 2);
  return "pipelines-" + hex(id.vendor_id, 4) + "-" + hex(id.device_id, 4) + "-" + hex(id.driver_version, 8) +
         "-" + uuid + "-" + hex(id.build_hash, 16) + ".bin";
}

std::optional<std::filesystem::path> pipeline_cache_dir() {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  if (auto dir = env("KVTRIE_PIPELINE_CACHE_DIR")) {
    if (dir->empty() || *dir == "off" || *dir == "0") return std::nullopt;
    return std::filesystem::path(*dir);
  }
  if (auto xdg = env("XDG_CACHE_HOME"); xdg && !xdg->empty()) return std::filesystem::path(*xdg) / "kvtrie";
  if (auto home = env("HOME"); home && !home->empty())
    return std::filesystem::path(*home) / ".cache" / "kvtrie";
  return std::nullopt;
}

const char* cache_file_status_name(CacheFileStatus status) {
  switch (status) {
    case CacheFileStatus::Loaded:
      return "loaded";
    case CacheFileStatus::Absent:
      return "absent";
    case CacheFileStatus::Corrupt:
      return "corrupt";
    case CacheFileStatus::Mismatched:
      return "mismatched";
  }
  return "?";
}

CacheFileContents read_pipeline_cache_file(const std::filesystem::path& file,
                                           const PipelineCacheIdentity& id) {
  CacheFileContents out;
  std::ifstream in(file, std::ios::binary);
  if (!in) return out;  // Absent
  std::vector<std::byte> bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) return {CacheFileStatus::Corrupt, {}, "unreadable"};
  bytes.resize(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (!in) return {CacheFileStatus::Corrupt, {}, "short read"};
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return {CacheFileStatus::Corrupt, {}, "no kvtrie pipeline-cache header"};
  const std::byte* p = bytes.data() + sizeof kMagic;
  PipelineCacheIdentity stored;
  stored.vendor_id = get<uint32_t>(p);
  stored.device_id = get<uint32_t>(p);
  stored.driver_version = get<uint32_t>(p);
  stored.cache_uuid = get<std::array<uint8_t, 16>>(p);
  stored.build_hash = get<uint64_t>(p);
  const auto data_size = get<uint64_t>(p);
  const auto data_hash = get<uint64_t>(p);
  if (!(stored == id)) return {CacheFileStatus::Mismatched, {}, "made for another device, driver or build"};
  const std::span<const std::byte> data(p, bytes.data() + bytes.size());
  if (data.size() != data_size) return {CacheFileStatus::Corrupt, {}, "truncated or padded data"};
  if (hash_bytes(data) != data_hash) return {CacheFileStatus::Corrupt, {}, "checksum mismatch"};
  out.status = CacheFileStatus::Loaded;
  out.data.assign(data.begin(), data.end());
  return out;
}

std::optional<std::string> write_pipeline_cache_file(const std::filesystem::path& file,
                                                     const PipelineCacheIdentity& id,
                                                     std::span<const std::byte> data) {
  std::error_code ec;
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) return "cannot create " + file.parent_path().string() + ": " + ec.message();
  // A name unique to this process and call: concurrent writers each rename their own complete file.
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path tmp = file;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::vector<std::byte> head = header(id, data);
    out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
    out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return "cannot write " + tmp.string();
    }
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return "cannot rename to " + file.string() + ": " + ec.message();
  }
  return std::nullopt;
}

}  // namespace kvtrie::vk
