#include "runner/model/model_fingerprint.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"

namespace kvtrie {

std::uint64_t model_file_fingerprint(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path.string() + ": cannot open to fingerprint: " + std::strerror(errno));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(state.get());
  std::vector<char> buffer(std::size_t{8} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw InputError(path.string() + ": cannot read to fingerprint: " + why);
    }
    if (n == 0) break;
    XXH3_64bits_update(state.get(), buffer.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return XXH3_64bits_digest(state.get());
}

}  // namespace kvtrie
