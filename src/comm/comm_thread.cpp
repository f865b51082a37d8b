#include "comm/comm_thread.hpp"

#include <cstdlib>

#include "runtime/activity.hpp"

#include "comm/tensor_checks.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::detail {
namespace {

using Clock = std::chrono::steady_clock;

// How long each side polls before it sleeps (see comm_thread.hpp). The
// communication thread's poll covers the gap between a blocking caller's
// back-to-back ops; the waiter's covers a collective of a few MiB, beyond
// which a wake-up's latency is lost in the op's own time.
// MPIACCEL_COMM_POLL_US=server,waiter overrides both (for measurements).
struct PollBudget {
  std::chrono::microseconds server{200};
  std::chrono::microseconds waiter{2000};
};

const PollBudget& poll_budget() {
  static const PollBudget budget = [] {
    PollBudget b;
    if (const char* text = std::getenv("MPIACCEL_COMM_POLL_US")) {
      char* end = nullptr;
      const long server = std::strtol(text, &end, 10);
      if (end != text && *end == ',') {
        const long waiter = std::strtol(end + 1, nullptr, 10);
        if (server >= 0 && waiter >= 0) {
          b.server = std::chrono::microseconds(server);
          b.waiter = std::chrono::microseconds(waiter);
        }
      }
    }
    return b;
  }();
  return budget;
}

// Polls `ready` until it holds or `budget` has passed, yielding the core on
// every turn so that a thread that has real work (a peer rank, our own
// communication thread) runs first when ranks outnumber cores.
template <typename Ready>
bool poll(Ready&& ready, std::chrono::microseconds budget) {
  if (ready()) return true;
  const auto until = Clock::now() + budget;
  for (;;) {
    std::this_thread::yield();
    if (ready()) return true;
    if (Clock::now() >= until) return false;
  }
}

}  // namespace

// The queue and its single execution slot, shared by the communication thread,
// the watcher and the handles (which help from wait()).
struct CommQueue {
  struct Task {
    std::shared_ptr<QueuedWork> work;
    std::function<void()> body;
  };

  CommQueue(int rank_, int size_, std::chrono::milliseconds timeout_)
      : rank(rank_), size(size_), timeout(timeout_) {}

  const int rank, size;
  const std::chrono::milliseconds timeout;

  std::mutex mutex;
  std::condition_variable server_cv;  // serve(): a task is runnable, or stop
  std::condition_variable watch_cv;   // watch(): an op started while idle, or stop
  std::deque<Task> tasks;
  std::shared_ptr<QueuedWork> running;  // holder of the slot's op, if any
  bool server_sleeping = false;
  bool watcher_idle = false;
  bool stop_serving = false;
  bool stop_watching = false;
  // Lock-free views for the polling loops; written under `mutex`.
  std::atomic<bool> runnable{false};  // a task is queued and the slot is free
  std::atomic<bool> stopping{false};

  void update_runnable() { runnable.store(!tasks.empty() && !running, std::memory_order_release); }

  // Under `mutex`: takes the slot and the front task, if both are free. Sets
  // `wake_watcher` when the watcher sleeps with no op to watch.
  bool claim(Task& task, bool& wake_watcher) {
    if (running || tasks.empty()) return false;
    task = std::move(tasks.front());
    tasks.pop_front();
    task.work->mark_started();
    running = task.work;
    update_runnable();
    wake_watcher = watcher_idle;
    return true;
  }

  // Claims and runs the front task on the calling thread; false when the slot
  // is taken or nothing is queued. `until`, when given, stops at a finished op.
  bool run_front(QueuedWork* until) {
    Task task;
    bool wake_watcher = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (until && until->test()) return false;
      if (!claim(task, wake_watcher)) return false;
    }
    if (wake_watcher) watch_cv.notify_all();
    execute(task);
    return true;
  }

  // Runs a claimed task, frees the slot, then publishes completion.
  void execute(Task& task) {
    std::exception_ptr error;
    try {
      task.body();
    } catch (...) {
      error = std::current_exception();
    }
    // Release the tensors the body captured before the caller can see "done",
    // so a completed op holds no memory.
    task.body = nullptr;
    task.work->mark_finished();  // before the slot frees: FIFO timestamps
    bool wake_server = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      running.reset();
      update_runnable();
      wake_server = server_sleeping && (!tasks.empty() || stop_serving);
    }
    if (wake_server) server_cv.notify_one();
    task.work->finish(std::move(error));
  }

  // The communication thread's loop.
  void serve() {
    for (;;) {
      poll([this] { return runnable.load(std::memory_order_acquire) ||
                           stopping.load(std::memory_order_acquire); },
           poll_budget().server);
      Task task;
      bool wake_watcher = false;
      {
        std::unique_lock<std::mutex> lock(mutex);
        while (!claim(task, wake_watcher)) {
          if (stop_serving && tasks.empty() && !running) return;  // drained
          server_sleeping = true;
          server_cv.wait(lock);
          server_sleeping = false;
        }
      }
      if (wake_watcher) watch_cv.notify_all();
      execute(task);
    }
  }

  // Sleeps until the running op's deadline and re-checks whichever op is
  // running then, so that ops starting and finishing never wake it (a wake-up
  // per op would cost as much as the hand-off saved above).
  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop_watching) {
      if (!running) {
        watcher_idle = true;
        watch_cv.wait(lock);
        watcher_idle = false;
        continue;
      }
      const auto deadline = running->started_at() + timeout;
      if (Clock::now() < deadline) {
        watch_cv.wait_until(lock, deadline);
        continue;
      }
      const std::string why =
          running->description() + " on rank " + std::to_string(rank) + " of " +
          std::to_string(size) + " did not complete within " + format_duration(timeout) +
          ": a peer never joined (a rank skipped this collective, called a different one, "
          "crashed or is stuck), or the network stalled; if ops are legitimately this slow, "
          "raise [distributed] timeout_s (this rank was at: " + current_activity() + ")";
      lock.unlock();
      fatal(why);
    }
  }
};

QueuedWork::QueuedWork(std::string name, std::string description,
                       std::weak_ptr<CommQueue> queue)
    : name_(std::move(name)), description_(std::move(description)), queue_(std::move(queue)) {}

void QueuedWork::wait() {
  if (!test()) {
    // Help first: if the op has not started and the slot is free, run the
    // queue up to it here instead of waking the communication thread.
    // No deadline here: the watcher bounds every op (and aborts the job when
    // it overruns), whichever thread runs it, so this wait always ends.
    std::shared_ptr<CommQueue> queue = queue_.lock();
    const bool done = poll(
        [&] {
          if (test()) return true;
          while (queue && started_.load(std::memory_order_acquire) == 0 &&
                 queue->runnable.load(std::memory_order_acquire) && queue->run_front(this)) {
          }
          return test();
        },
        poll_budget().waiter);
    queue.reset();
    if (!done) {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return test(); });
    }
  }
  if (error_) std::rethrow_exception(error_);  // written before done_ was released
}

std::chrono::steady_clock::time_point QueuedWork::started_at() const {
  return Clock::time_point(Clock::duration(started_.load(std::memory_order_acquire)));
}

std::chrono::steady_clock::time_point QueuedWork::finished_at() const {
  return Clock::time_point(Clock::duration(finished_.load(std::memory_order_acquire)));
}

void QueuedWork::mark_started() {
  started_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
}

void QueuedWork::mark_finished() {
  finished_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
}

void QueuedWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

CommThread::CommThread(int rank, int size, std::chrono::milliseconds timeout)
    : queue_(std::make_shared<CommQueue>(rank, size, timeout)) {
  server_ = std::thread([queue = queue_.get()] { queue->serve(); });
  watcher_ = std::thread([queue = queue_.get()] { queue->watch(); });
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stop_serving = true;
    queue_->stopping.store(true, std::memory_order_release);
  }
  queue_->server_cv.notify_all();
  server_.join();  // drains the queue; the watcher still guards each op
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->stop_watching = true;
  }
  queue_->watch_cv.notify_all();
  watcher_.join();
}

namespace {
thread_local bool caller_waits = false;
}  // namespace

CallerWaitsScope::CallerWaitsScope() : previous_(caller_waits) { caller_waits = true; }
CallerWaitsScope::~CallerWaitsScope() { caller_waits = previous_; }

std::chrono::milliseconds CommThread::timeout() const { return queue_->timeout; }

std::shared_ptr<QueuedWork> CommThread::enqueue(std::string name, std::string description,
                                                std::function<void()> body) {
  auto work = std::make_shared<QueuedWork>(std::move(name), std::move(description), queue_);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_->mutex);
    queue_->tasks.push_back(CommQueue::Task{work, std::move(body)});
    queue_->update_runnable();
    // While it polls, the thread sees `runnable` without a wake-up call; while
    // the slot is taken, whoever frees it wakes the thread.
    wake = queue_->server_sleeping && !queue_->running && !caller_waits;
  }
  if (wake) queue_->server_cv.notify_one();
  return work;
}

void CommThread::run(std::string name, std::string description, std::function<void()> body) {
  CallerWaitsScope caller_waits_here;
  enqueue(std::move(name), std::move(description), std::move(body))->wait();
}

}  // namespace mpiaccel::detail
