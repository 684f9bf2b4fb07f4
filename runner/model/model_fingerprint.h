// Contract: the identity of a model file's content for the disk KV tier: XXH3-64 of every byte of the file
// (metadata and tensor data), so a copy or a rename keeps it and any other change of the file does not;
// neither the path nor the mtime enters. Reads the whole file (about a second for 8 GB in the page cache).
// Any thread. Throws InputError when the file cannot be read.
#pragma once
#include <cstdint>
#include <filesystem>

namespace kvtrie {

std::uint64_t model_file_fingerprint(const std::filesystem::path& path);

}  // namespace kvtrie
