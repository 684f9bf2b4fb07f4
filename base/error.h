// Contract: the one exception type of kvtrie, for broken invariants and driver failures. It carries the
// source location and the text of the failing check; a failed Vulkan call throws the subclass
// vk::VulkanError (kernels/vk/vk_check.h), which also carries the VkResult. Expected outcomes (pool full,
// prompt too long, client gone) are return values, never this. In base/ so that every layer (the tokenizer,
// the sampler and the GGUF reader included) throws it without depending on the Vulkan library. Header-only;
// usable from any thread.
#pragma once
#include <source_location>
#include <stdexcept>
#include <string>

namespace kvtrie {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::source_location where = std::source_location::current())
      : std::runtime_error(what), file_(where.file_name()), line_(where.line()) {}
  const char* file() const noexcept { return file_; }
  unsigned line() const noexcept { return line_; }

 private:
  const char* file_;
  unsigned line_;
};

// A file given by the user (model, config) is unusable: the message names the file and the problem.
class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace kvtrie

// KVTRIE_CHECK(cond, message): throw kvtrie::Error naming the failed condition when cond is false.
#define KVTRIE_CHECK(cond, msg)                                                           \
  do {                                                                                    \
    if (!(cond)) throw ::kvtrie::Error(std::string("check failed: " #cond ": ") + (msg)); \
  } while (0)
