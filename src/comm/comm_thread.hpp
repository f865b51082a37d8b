#pragma once
// Internal: the communication thread of an MPI communicator.
//
// Every op of a communicator is a task run on its one thread, in enqueue
// order, as a blocking MPI call. One thread per communicator gives two
// guarantees at once: every rank issues the same sequence of collectives on
// the MPI_Comm (the callers enqueue in the same order), and the collective
// progresses while the caller computes (Open MPI progresses non-blocking
// collectives only inside MPI calls, so MPI_Iallreduce alone would not
// overlap).
//
// Deadline: each op must finish within `timeout` of the moment it STARTED on
// the thread. Time spent queued behind earlier ops is not charged to it, since
// each of those is held to the same deadline; a caller waiting on the k-th
// queued op therefore waits at most k·timeout. A watcher thread enforces the
// deadline whether or not anybody waits: when it passes, the job is aborted
// with fatal(), naming the op, its bytes and the rank. Aborting is the only
// safe end: a collective some peer never joined cannot be cancelled.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// The Work handle of a task on a CommThread.
class QueuedWork final : public Work {
 public:
  QueuedWork(std::string name, std::string description);

  bool test() override { return done_.load(std::memory_order_acquire); }
  void wait() override;
  const std::string& name() const override { return name_; }
  std::chrono::steady_clock::time_point started_at() const override;
  std::chrono::steady_clock::time_point finished_at() const override;

  /// "all_reduce of 4194304 bytes (float32)".
  const std::string& description() const { return description_; }

  void mark_started();
  void finish(std::exception_ptr error);

 private:
  using Clock = std::chrono::steady_clock;
  std::string name_;
  std::string description_;
  std::atomic<Clock::rep> started_{0};
  std::atomic<Clock::rep> finished_{0};
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::exception_ptr error_;
};

class CommThread {
 public:
  /// `rank`/`size` name this process in the deadline message.
  CommThread(int rank, int size, std::chrono::milliseconds timeout);
  /// Runs every task still queued, then joins. Never throws.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  /// Queues `body` to run on the thread; its exception, if any, is rethrown by
  /// the returned handle's wait().
  std::shared_ptr<QueuedWork> enqueue(std::string name, std::string description,
                                      std::function<void()> body);

  /// enqueue + wait.
  void run(std::string name, std::string description, std::function<void()> body);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  struct Task {
    std::shared_ptr<QueuedWork> work;
    std::function<void()> body;
  };
  void serve();
  void watch();

  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable queue_cv_;  // serve(): a task arrived or stop
  std::condition_variable watch_cv_;  // watch(): an op started/finished or stop
  std::deque<Task> queue_;
  bool stop_serving_ = false;
  bool stop_watching_ = false;
  std::shared_ptr<QueuedWork> running_;  // the op now executing, if any
  uint64_t started_ops_ = 0;             // tells the watcher a new op began
  std::thread server_;
  std::thread watcher_;
};

}  // namespace mpiaccel::detail
