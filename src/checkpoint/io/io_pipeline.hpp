#pragma once
// Chunked file I/O with several requests in flight, for the tensor bytes of a
// save (RawWriter) and a load (RawReader). A ring of 4 KiB-aligned staging
// buffers (O_DIRECT needs them) and two worker threads that only pread/pwrite:
// no HDF5 call, no allocation, no exception. The calling thread meanwhile
// copies and checksums the neighbouring chunks, so the disk always has the
// next request queued (measured on this VM: one 8 MiB request at a time with a
// thread started per chunk left ~4 ms gaps between 7 ms writes;
// docs/checkpoint.md, "Save speed").

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace mpiaccel::detail {

using IoClock = std::chrono::steady_clock;
/// Seconds from `start` to now (the I/O statistics' clock).
inline double seconds_since(IoClock::time_point start) {
  return std::chrono::duration<double>(IoClock::now() - start).count();
}

/// O_DIRECT needs offsets, lengths and buffer addresses aligned to the
/// device's logical block (512 B or 4 KiB); 4 KiB satisfies both.
inline constexpr int64_t kDirectAlign = 4096;
inline int64_t align_up(int64_t x) { return (x + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }
inline int64_t align_down(int64_t x) { return x / kDirectAlign * kDirectAlign; }

class IoPipeline {
 public:
  /// Bytes per request: large enough that the per-request cost vanishes (the
  /// block layer splits it into the device's maximum request size anyway).
  static constexpr int64_t kChunk = 4 << 20;
  static constexpr int kSlots = 4;    // staging buffers
  static constexpr int kWorkers = 2;  // requests in flight

  struct Result {
    int64_t done = 0;  // bytes transferred before an error, a short transfer or EOF
    int err = 0;       // errno of the failed call; 0 for a short transfer/EOF
  };

  /// Takes the staging buffers (kept per process and reused, so a save does
  /// not touch fresh memory each time) and starts the workers. Throws when
  /// out of memory.
  IoPipeline();
  /// Waits for every request in flight, then stops the workers.
  ~IoPipeline();
  IoPipeline(const IoPipeline&) = delete;
  IoPipeline& operator=(const IoPipeline&) = delete;

  char* buffer(int slot) const { return buffers_ + slot * kChunk; }
  /// Queues one pread (write=false) or pwrite of `len` bytes at `offset`
  /// from/into `data` (usually buffer(slot)); the slot must be idle.
  void submit(int slot, int fd, bool write, char* data, int64_t len, int64_t offset);
  bool busy(int slot);
  /// Blocks until the slot's request has finished; its result.
  Result wait(int slot);
  /// Waits for every slot.
  void drain();

 private:
  struct Request {
    int fd = -1;
    bool write = false, queued = false, finished = true;
    char* data = nullptr;
    int64_t len = 0, offset = 0;
    Result result;
  };
  void work();

  char* buffers_ = nullptr;
  std::mutex mutex_;
  std::condition_variable queued_, finished_;
  std::vector<Request> slots_;
  std::vector<int> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace mpiaccel::detail
