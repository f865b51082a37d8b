#pragma once
// Internal: the communication thread of an MPI communicator.
//
// Every op of a communicator is a task in one FIFO queue, run as a blocking
// MPI call by whichever thread holds the queue's single execution slot: the
// communication thread, or a caller blocked in wait() (see below). One slot
// per communicator gives two guarantees at once: every rank issues the same
// sequence of collectives on the MPI_Comm (the callers enqueue in the same
// order, and tasks run one at a time in that order, whichever thread runs
// them), and an async collective progresses while the caller computes (Open
// MPI progresses non-blocking collectives only inside MPI calls, so
// MPI_Iallreduce alone would not overlap).
//
// Hand-off cost. Waking a sleeping thread is a scheduler round trip: tens of
// µs on an idle core, over 100 µs when ranks outnumber cores — as much as a
// 1 MiB collective takes. So neither side sleeps first:
//  - the communication thread polls (with sched_yield) for new work for a
//    while after each task before sleeping, and enqueue() skips the wake-up
//    call while it polls;
//  - wait() polls the done flag (with sched_yield) before sleeping;
//  - wait() on an op that has not started, while the slot is free, runs the
//    queued tasks up to its own on the calling thread ("helping"): a blocking
//    call then costs what the bare MPI call costs. FIFO order and one task at
//    a time still hold, since helpers claim the same slot from the same queue.
// Polling yields the core on every turn, so it costs little when ranks
// outnumber cores (Open MPI's own waits poll the same way under
// mpi_yield_when_idle, which the runtime sets).
//
// Deadline: each op must finish within `timeout` of the moment it STARTED.
// Time spent queued behind earlier ops is not charged to it, since each of
// those is held to the same deadline; a caller waiting on the k-th queued op
// therefore waits at most k·timeout. A watcher thread enforces the deadline
// whether or not anybody waits, whichever thread runs the op: when it passes,
// the job is aborted with fatal(), naming the op, its bytes and the rank.
// Aborting is the only safe end: a collective some peer never joined cannot be
// cancelled.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

struct CommQueue;

/// While alive, the calling thread promises to wait() at once for the ops it
/// enqueues (the blocking Communicator calls). enqueue() then does not wake a
/// sleeping communication thread for them: the waiter runs them itself, and
/// a wake-up would only put a second thread on a core the caller's own MPI
/// progress needs. Nests; per thread.
class CallerWaitsScope {
 public:
  CallerWaitsScope();
  ~CallerWaitsScope();
  CallerWaitsScope(const CallerWaitsScope&) = delete;
  CallerWaitsScope& operator=(const CallerWaitsScope&) = delete;

 private:
  bool previous_;
};

/// The Work handle of a task on a CommThread.
class QueuedWork final : public Work {
 public:
  QueuedWork(std::string name, std::string description, std::weak_ptr<CommQueue> queue);

  bool test() override { return done_.load(std::memory_order_acquire); }
  void wait() override;
  const std::string& name() const override { return name_; }
  std::chrono::steady_clock::time_point started_at() const override;
  std::chrono::steady_clock::time_point finished_at() const override;

  /// "all_reduce of 4194304 bytes (float32)".
  const std::string& description() const { return description_; }

  void mark_started();
  void mark_finished();
  /// Publishes completion (and the op's error, if any) to waiters.
  void finish(std::exception_ptr error);

 private:
  using Clock = std::chrono::steady_clock;
  std::string name_;
  std::string description_;
  // Weak: a handle may outlive its communicator (then it is already done).
  std::weak_ptr<CommQueue> queue_;
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

  /// Queues `body` to run in FIFO order; its exception, if any, is rethrown by
  /// the returned handle's wait().
  std::shared_ptr<QueuedWork> enqueue(std::string name, std::string description,
                                      std::function<void()> body);

  /// enqueue + wait (which usually runs `body` on the calling thread).
  void run(std::string name, std::string description, std::function<void()> body);

  std::chrono::milliseconds timeout() const;

 private:
  std::shared_ptr<CommQueue> queue_;
  std::thread server_;
  std::thread watcher_;
};

}  // namespace mpiaccel::detail
