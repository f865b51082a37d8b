// BatchPrefetcher: a FIFO of batch jobs and the threads that fetch them.

#include "data/batch_prefetcher.hpp"

#include <utility>

#include "data/batch_transfer.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

BatchPrefetcher::BatchPrefetcher(std::shared_ptr<const Dataset> dataset, int64_t workers, bool pin)
    : dataset_(std::move(dataset)), pin_(pin) {
  try {
    for (int64_t i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {  // no thread: stop those started
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    queued_.notify_all();
    for (std::thread& t : workers_) t.join();
    throw;
  }
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    jobs_.clear();
  }
  queued_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void BatchPrefetcher::submit(std::vector<int64_t> indices) {
  auto job = std::make_shared<Job>();
  job->indices = std::move(indices);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  queued_.notify_one();
}

Batch BatchPrefetcher::take() {
  std::unique_lock<std::mutex> lock(mutex_);
  MPIACCEL_CHECK(!jobs_.empty(), "BatchPrefetcher::take: no batch was submitted");
  const std::shared_ptr<Job> job = jobs_.front();
  finished_.wait(lock, [&] { return job->done; });
  jobs_.pop_front();
  if (job->error) std::rethrow_exception(job->error);
  return std::move(job->batch);
}

void BatchPrefetcher::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_.clear();
}

// Each worker takes the oldest job nobody has claimed, so batches are fetched
// in the order they will be taken; a job dropped by clear() while being
// fetched is kept alive by the worker's reference and then discarded.
std::shared_ptr<BatchPrefetcher::Job> BatchPrefetcher::first_unclaimed() const {
  for (const auto& job : jobs_)
    if (!job->claimed) return job;
  return nullptr;
}

void BatchPrefetcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    std::shared_ptr<Job> job;
    queued_.wait(lock, [&] { return stop_ || (job = first_unclaimed()) != nullptr; });
    if (stop_) return;
    job->claimed = true;
    lock.unlock();
    Batch batch;
    std::exception_ptr error;
    try {
      batch = dataset_->get(job->indices);
      if (pin_) batch = pinned(batch);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    job->batch = std::move(batch);
    job->error = error;
    job->done = true;
    finished_.notify_all();
  }
}

}  // namespace mpiaccel::detail
