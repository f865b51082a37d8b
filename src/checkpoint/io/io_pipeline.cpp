#include "checkpoint/io/io_pipeline.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "checkpoint/io/file_system.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kBufferBytes = static_cast<size_t>(IoPipeline::kChunk) * IoPipeline::kSlots;

// One set of staging buffers is kept for the process: on a VM that returns
// freed memory to the host, touching 16 MiB of fresh memory costs ~35 ms per
// save. A second pipeline at the same time gets its own set. The set is 2 MiB
// aligned and asks for transparent huge pages: with 4 KiB pages, loads on this
// VM ran at either ~1.7 or ~0.8 GB/s depending on the process (2 of 7 runs
// slow); with huge pages 5 of 5 runs read at 1.85-2.42 GB/s
// (docs/checkpoint.md, "Load speed").
std::mutex pool_mutex;
char* pool = nullptr;

char* take_buffers() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    if (pool) return std::exchange(pool, nullptr);
  }
  void* p = nullptr;
  MPIACCEL_CHECK(::posix_memalign(&p, kHugePage, kBufferBytes) == 0,
                 "out of memory for the checkpoint's " + std::to_string(kBufferBytes >> 20) +
                     " MiB I/O staging buffers");
  ::madvise(p, kBufferBytes, MADV_HUGEPAGE);  // a hint: ignored where THP is off
  return static_cast<char*>(p);
}

void give_buffers(char* p) {
  std::lock_guard<std::mutex> lock(pool_mutex);
  if (!pool)
    pool = p;
  else
    std::free(p);
}

// One request: the bytes done before an error, a short transfer or EOF.
IoPipeline::Result transfer(int fd, bool write, char* data, int64_t len, int64_t offset) {
  IoPipeline::Result r;
  while (r.done < len) {
    const auto n = static_cast<size_t>(len - r.done);
    const ssize_t got = write ? file_system().pwrite(fd, data + r.done, n, offset + r.done)
                              : file_system().pread(fd, data + r.done, n, offset + r.done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) r.err = errno;
    if (got <= 0) break;
    r.done += got;
  }
  return r;
}

}  // namespace

IoPipeline::IoPipeline() : buffers_(take_buffers()), slots_(kSlots) {
  try {
    for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {  // no thread: stop those started, keep nothing
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    queued_.notify_all();
    for (auto& w : workers_) w.join();
    give_buffers(buffers_);
    throw;
  }
}

IoPipeline::~IoPipeline() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  queued_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  if (buffers_) give_buffers(std::exchange(buffers_, nullptr));
}

void IoPipeline::submit(int slot, int fd, bool write, char* data, int64_t len, int64_t offset) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Request& r = slots_[static_cast<size_t>(slot)];
    r = Request{fd, write, true, false, data, len, offset, Result{}};
    queue_.push_back(slot);
  }
  queued_.notify_one();
}

bool IoPipeline::busy(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  return !slots_[static_cast<size_t>(slot)].finished;
}

IoPipeline::Result IoPipeline::wait(int slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  Request& r = slots_[static_cast<size_t>(slot)];
  finished_.wait(lock, [&] { return r.finished; });
  return r.result;
}

void IoPipeline::drain() {
  for (int s = 0; s < kSlots; ++s) wait(s);
}

void IoPipeline::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    const int slot = queue_.front();
    queue_.erase(queue_.begin());
    const Request r = slots_[static_cast<size_t>(slot)];
    lock.unlock();
    const Result result = transfer(r.fd, r.write, r.data, r.len, r.offset);
    lock.lock();
    slots_[static_cast<size_t>(slot)].result = result;
    slots_[static_cast<size_t>(slot)].finished = true;
    finished_.notify_all();
  }
}

}  // namespace mpiaccel::detail
