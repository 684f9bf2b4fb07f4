// Contract: the on-disk form of a VkPipelineCache, so that a restarted process skips the driver's shader
// compilation. One file per (device, driver version, kvtrie build): the file name carries the vendor and
// device ids, the driver version, the driver's pipelineCacheUUID and a hash of every embedded SPIR-V module,
// and a header repeats them with the size and a checksum of the cache data. Reading never throws: an absent,
// corrupt or mismatched file is reported as such and the caller starts with an empty cache. Writing is
// atomic (a temporary file in the same directory, then rename), so concurrent processes never see a torn
// file; a failed write is reported, never thrown. Free functions; safe from any thread (each call touches
// only its own file and temporaries).
//
// Where: pipeline_cache_dir() resolves $KVTRIE_PIPELINE_CACHE_DIR, else $XDG_CACHE_HOME/kvtrie, else
// $HOME/.cache/kvtrie. KVTRIE_PIPELINE_CACHE_DIR=off (or 0, or empty) disables the disk cache.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvtrie::vk {

class Device;

struct PipelineCacheIdentity {
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
  uint32_t driver_version = 0;
  std::array<uint8_t, 16> cache_uuid{};  // VkPhysicalDeviceProperties::pipelineCacheUUID
  uint64_t build_hash = 0;               // of the embedded SPIR-V (names and words)
  bool operator==(const PipelineCacheIdentity&) const = default;
};

// The identity of this device and driver with this build's shaders.
PipelineCacheIdentity pipeline_cache_identity(const Device& device);
// A hash of every embedded SPIR-V module (computed once per process).
uint64_t embedded_spirv_hash();

// The cache file name for that identity (no directory).
std::string pipeline_cache_file_name(const PipelineCacheIdentity& identity);
// The directory from the environment (see the contract), or nullopt when the disk cache is disabled or no
// directory can be named.
std::optional<std::filesystem::path> pipeline_cache_dir();

enum class CacheFileStatus { Loaded, Absent, Corrupt, Mismatched };
const char* cache_file_status_name(CacheFileStatus status);

struct CacheFileContents {
  CacheFileStatus status = CacheFileStatus::Absent;
  std::vector<std::byte> data;  // the VkPipelineCache data (Loaded only)
  std::string reason;           // why it was not loaded (Corrupt, Mismatched)
};

CacheFileContents read_pipeline_cache_file(const std::filesystem::path& file,
                                           const PipelineCacheIdentity& identity);
// Writes header + data atomically, creating the directory. Returns an error text, or nullopt on success.
std::optional<std::string> write_pipeline_cache_file(const std::filesystem::path& file,
                                                     const PipelineCacheIdentity& identity,
                                                     std::span<const std::byte> data);

}  // namespace kvtrie::vk
