// Contract: CPU access to the bytes of host-tier pages, which the disk tier needs: a page the host tier
// drops is written to disk from here, and a page read from disk lands here before a promotion copies it to
// the device. VkPageStore implements it over its mapped host chunks; tests over simulated pages.
// Ordering: the cache reads a page only after every copy into it is complete (it waited for the copier),
// and writes one only while no copy reads or writes it; host_page_written() makes the CPU's writes visible
// to later copies (a flush of non-coherent memory). Called only from the cache's owner thread; must outlive
// the KvCache it is attached to. The bytes of a span it returned may be written by other threads (the disk
// tier's readers) that the owner thread waits for before it calls host_page_written().
#pragma once
#include <cstddef>
#include <span>

#include "cache/page_pool.h"

namespace kvtrie {

class HostPageMemory {
 public:
  virtual ~HostPageMemory() = default;
  // The page's bytes, current as of the last completed copy into it.
  virtual std::span<const std::byte> read_host_page(PageId page) = 0;
  // The page's bytes to overwrite; call host_page_written(page) when done.
  virtual std::span<std::byte> write_host_page(PageId page) = 0;
  virtual void host_page_written(PageId page) = 0;
};

}  // namespace kvtrie
