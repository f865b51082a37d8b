#include "comm/comm_thread.hpp"

#include "runtime/activity.hpp"

#include "comm/tensor_checks.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel::detail {

QueuedWork::QueuedWork(std::string name, std::string description)
    : name_(std::move(name)), description_(std::move(description)) {}

void QueuedWork::wait() {
  // No deadline here: the CommThread's watcher bounds every op (and aborts the
  // job when it overruns), so this wait always ends.
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
  if (error_) std::rethrow_exception(error_);
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

void QueuedWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    finished_.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

CommThread::CommThread(int rank, int size, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  server_ = std::thread([this] { serve(); });
  watcher_ = std::thread([this] { watch(); });
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_serving_ = true;
  }
  queue_cv_.notify_all();
  server_.join();  // drains the queue; the watcher still guards each op
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_watching_ = true;
  }
  watch_cv_.notify_all();
  watcher_.join();
}

std::shared_ptr<QueuedWork> CommThread::enqueue(std::string name, std::string description,
                                                std::function<void()> body) {
  auto work = std::make_shared<QueuedWork>(std::move(name), std::move(description));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Task{work, std::move(body)});
  }
  queue_cv_.notify_one();
  return work;
}

void CommThread::run(std::string name, std::string description, std::function<void()> body) {
  enqueue(std::move(name), std::move(description), std::move(body))->wait();
}

void CommThread::serve() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [this] { return stop_serving_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      task.work->mark_started();
      running_ = task.work;
      ++started_ops_;
    }
    watch_cv_.notify_all();
    std::exception_ptr error;
    try {
      task.body();
    } catch (...) {
      error = std::current_exception();
    }
    // Release the tensors the body captured before the caller can see "done",
    // so a completed op holds no memory.
    task.body = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.reset();
    }
    watch_cv_.notify_all();
    task.work->finish(std::move(error));
  }
}

void CommThread::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_watching_) {
    if (!running_) {
      watch_cv_.wait(lock, [this] { return stop_watching_ || running_ != nullptr; });
      continue;
    }
    const uint64_t op = started_ops_;
    const auto deadline = running_->started_at() + timeout_;
    const bool moved_on = watch_cv_.wait_until(lock, deadline, [this, op] {
      return stop_watching_ || !running_ || started_ops_ != op;
    });
    if (moved_on) continue;
    const std::string why =
        running_->description() + " on rank " + std::to_string(rank_) + " of " +
        std::to_string(size_) + " did not complete within " + format_duration(timeout_) +
        ": a peer never joined (a rank skipped this collective, called a different one, "
        "crashed or is stuck), or the network stalled; if ops are legitimately this slow, "
        "raise [distributed] timeout_s (this rank was at: " + current_activity() + ")";
    lock.unlock();
    fatal(why);
  }
}

}  // namespace mpiaccel::detail
