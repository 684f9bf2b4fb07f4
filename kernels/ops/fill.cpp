// fill.comp: a buffer set to one f32 value. No dispatch function: the Vulkan runtime's tests record it
// themselves (tests/kernels/test_vk_runtime.cpp); its row keeps it in the prewarm like every kernels shader.
#include "kernels/ops/op_registry.h"

namespace kvtrie::kernels {

namespace {
constexpr std::string_view kVariants[] = {"f32"};
constexpr OpRegistration kFill{.op = "fill", .variants = kVariants, .spec = spec_elementwise};
}  // namespace

KVTRIE_REGISTER_OPS(fill, &kFill);

}  // namespace kvtrie::kernels
