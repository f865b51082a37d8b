#pragma once
// Worker threads that fetch batches ahead of the training thread, for the
// DistributedLoader (loader.hpp, [train] num_workers). The loader decides
// which samples each batch holds, in order, on its own thread; the workers
// only call Dataset::get (and pin the result), so the batches, their order
// and the loader's resumable position are those of a loader without workers.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mpiaccel/loader.hpp"

namespace mpiaccel::detail {

class BatchPrefetcher {
 public:
  /// `pin`: page-lock each fetched batch (for a GPU's asynchronous copy).
  BatchPrefetcher(std::shared_ptr<const Dataset> dataset, int64_t workers, bool pin);
  /// Lets the batches being fetched finish, drops the rest, joins the workers.
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  /// Queues a batch of `indices`; a free worker fetches it.
  void submit(std::vector<int64_t> indices);
  /// The oldest batch submitted and not yet taken, waiting for it; rethrows
  /// what Dataset::get threw for it.
  Batch take();
  /// Forgets every batch not yet taken (those being fetched finish unseen).
  void clear();

 private:
  struct Job {
    std::vector<int64_t> indices;
    bool claimed = false, done = false;
    Batch batch;
    std::exception_ptr error;
  };
  void work();
  /// The oldest job no worker has claimed; null if none. Under mutex_.
  std::shared_ptr<Job> first_unclaimed() const;

  std::shared_ptr<const Dataset> dataset_;
  bool pin_;
  mutable std::mutex mutex_;
  std::condition_variable queued_, finished_;
  std::deque<std::shared_ptr<Job>> jobs_;  // submission order
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mpiaccel::detail
