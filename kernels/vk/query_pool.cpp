#include "kernels/vk/query_pool.h"

#include "kernels/vk/device.h"
#include "kernels/vk/vk_check.h"

namespace kvtrie::vk {

QueryPool::QueryPool(const Device& device, uint32_t count) : device_(&device), count_(count) {
  KVTRIE_CHECK(device.info().timestamps, "device " + device.info().name + " has no compute timestamps");
  VkQueryPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
  info.queryType = VK_QUERY_TYPE_TIMESTAMP;
  info.queryCount = count;
  VkQueryPool pool;
  VK_CHECK(vkCreateQueryPool(device.handle(), &info, nullptr, &pool));
  pool_ = QueryPoolHandle(device.handle(), pool);
}

std::vector<double> QueryPool::results_ns(uint32_t n) const {
  KVTRIE_CHECK(n <= count_, "more timestamps asked than the pool holds");
  std::vector<uint64_t> ticks(n);
  if (n > 0)
    VK_CHECK(vkGetQueryPoolResults(device_->handle(), pool_.get(), 0, n, n * sizeof(uint64_t), ticks.data(),
                                   sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  std::vector<double> out(n);
  for (uint32_t i = 0; i < n; ++i)
    out[i] = static_cast<double>(ticks[i]) * device_->info().timestamp_period_ns;
  return out;
}

}  // namespace kvtrie::vk
