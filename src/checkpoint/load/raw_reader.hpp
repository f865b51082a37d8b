#pragma once
// The tensor bytes of a load, read straight from the checkpoint file at the
// addresses HDF5 allocated for them (H5Dget_offset of a contiguous dataset,
// as the save wrote them), with O_DIRECT where the file system allows it and
// several requests in flight (IoPipeline). Compared with HDF5 hyperslab reads
// through the page cache this skips the page cache's allocation, which on
// this VM costs more than the disk itself (docs/checkpoint.md, "Load speed").

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace mpiaccel::detail {

class IoPipeline;

class RawReader {
 public:
  /// Time spent by the calling thread, for the load's debug log.
  struct Stats {
    double wait_seconds = 0;  // waiting for the disk
    double sink_seconds = 0;  // CRC32C and copies (the sink)
    int64_t direct_bytes = 0, buffered_bytes = 0;
  };
  /// Receives consecutive pieces of the requested range, in order.
  using Sink = std::function<void(const char* data, int64_t bytes)>;

  /// Opens `path` for reading: once buffered, and once with O_DIRECT where
  /// the file system allows it and MPIACCEL_CKPT_DIRECT_IO is not 0. Throws.
  explicit RawReader(const std::string& path);
  ~RawReader();
  RawReader(const RawReader&) = delete;
  RawReader& operator=(const RawReader&) = delete;

  /// Streams bytes [offset, offset + bytes) of the file to `sink`, reading
  /// ahead while the sink works on the previous piece. With O_DIRECT the
  /// reads are widened to whole 4 KiB blocks; a device that rejects that
  /// alignment (EINVAL) makes this and later reads buffered. Throws naming
  /// the file when it ends early (truncated) or a read fails.
  void read(int64_t offset, int64_t bytes, const Sink& sink);
  bool direct() const { return direct_fd_ >= 0; }
  const Stats& stats() const { return stats_; }

 private:
  void stream(int fd, bool direct, int64_t offset, int64_t bytes, const Sink& sink);

  std::string path_;
  int buffered_fd_ = -1, direct_fd_ = -1;
  std::unique_ptr<IoPipeline> pipeline_;
  Stats stats_;
};

}  // namespace mpiaccel::detail
