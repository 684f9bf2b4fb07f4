// Contract: ParallelFor runs the items of one job on several threads at once: its own helper threads
// plus the calling thread, items taken in index order (the first items start first). The disk tier reads a
// run of page files with it, so that several reads are in flight (a disk, a virtual one most of all, is
// far faster at a queue depth above one) and their checksums run on several cores; the engine samples a
// step's rows with it.
// run() blocks until every item is done or skipped; a job may stop the run early (items not started are
// skipped). One run at a time: run() is called from one thread (its owner serialises its callers). The
// destructor joins the helpers; no run may be in progress.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvtrie {

class ParallelFor {
 public:
  // threads: how many items run at once, the caller's thread included (at least 1).
  explicit ParallelFor(std::uint32_t threads);
  ~ParallelFor();
  ParallelFor(const ParallelFor&) = delete;
  ParallelFor& operator=(const ParallelFor&) = delete;

  std::uint32_t threads() const { return static_cast<std::uint32_t>(helpers_.size()) + 1; }
  // Runs item(i) for i in [0, count) and returns when all have run; item returns false to stop the run
  // (items not started yet are skipped; those started finish). Items must not throw.
  void run(std::size_t count, const std::function<bool(std::size_t)>& item);

 private:
  void helper_loop();
  // Takes and runs items of the current job until none is left.
  void work();

  std::mutex mutex_;
  std::condition_variable job_ready_, job_done_;
  const std::function<bool(std::size_t)>* item_ = nullptr;  // the job in progress (nullptr: none)
  std::size_t count_ = 0;
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> stop_run_{false};
  std::uint64_t generation_ = 0;  // one per run: a helper joins each run once
  std::uint32_t busy_ = 0;        // helpers inside work() for the current run
  bool stopping_ = false;
  std::vector<std::thread> helpers_;  // last: started once every member above exists
};

}  // namespace kvtrie
