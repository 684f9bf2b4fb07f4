// Contract: how many KV pages the device and host tiers get, from the model's page size, the serving
// configuration and the device (GpuEngine logs the result and allocates it). Pure function of its inputs,
// any thread.
//   Device tier: the configured bytes, else max(a quarter of the free device-local memory, two full
//   contexts per slot: a whole round of requests stays cached while the next one runs); at most what
//   attention can bind (max_bindings storage-buffer bindings of pages_per_binding whole pages).
//   Host tier: the configured bytes, else twice the device tier (host memory is larger and cheaper, and
//   demoted pages go there).
#pragma once
#include <cstdint>

namespace kvtrie::engine {

struct KvTierInputs {
  uint64_t page_bytes = 0;
  uint32_t page_tokens = 16;
  uint32_t n_ctx = 0;              // tokens per sequence at most
  uint32_t parallel = 1;           // slots
  uint64_t kv_device_bytes = 0;    // configured; 0: the default rule
  uint64_t kv_host_bytes = 0;      // configured; 0: the default rule
  uint64_t device_local_free = 0;  // bytes of free device-local memory
  uint64_t pages_per_binding = 0;  // whole pages in one storage-buffer binding
  uint32_t max_bindings = 1;       // bindings attention reads the device tier through
};

struct KvTierSizes {
  uint32_t device_pages = 0;
  uint32_t host_pages = 0;
  uint64_t wanted_device_pages = 0;  // before the binding cap (device_pages < it: capped)
  uint64_t pages_per_sequence = 0;   // one full context
};

KvTierSizes size_kv_tiers(const KvTierInputs& in);

}  // namespace kvtrie::engine
