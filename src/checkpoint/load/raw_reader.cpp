#include "checkpoint/load/raw_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "checkpoint/io/file_system.hpp"
#include "checkpoint/io/io_pipeline.hpp"
#include "checkpoint/save/raw_writer.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

RawReader::RawReader(const std::string& path) : path_(path) {
  buffered_fd_ = file_system().open(path.c_str(), O_RDONLY | O_CLOEXEC, 0);
  MPIACCEL_CHECK(buffered_fd_ >= 0, "cannot open checkpoint " + path + " to read tensor data: " +
                                        std::strerror(errno));
  if (direct_io_enabled())
    direct_fd_ = file_system().open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT, 0);  // -1: not supported here
}

RawReader::~RawReader() {
  pipeline_.reset();  // waits for reads in flight before the descriptors close
  if (direct_fd_ >= 0) file_system().close(direct_fd_);
  if (buffered_fd_ >= 0) file_system().close(buffered_fd_);
}

void RawReader::read(int64_t offset, int64_t bytes, const Sink& sink) {
  if (bytes <= 0) return;
  if (!pipeline_) pipeline_ = std::make_unique<IoPipeline>();
  if (direct_fd_ >= 0)
    stream(direct_fd_, true, offset, bytes, sink);
  else
    stream(buffered_fd_, false, offset, bytes, sink);
}

void RawReader::stream(int fd, bool direct, int64_t offset, int64_t bytes, const Sink& sink) {
  IoPipeline& io = *pipeline_;
  const int64_t end = offset + bytes;
  const int64_t first = direct ? align_down(offset) : offset;
  const int64_t last = direct ? align_up(end) : end;  // may pass the end of the file
  const int64_t chunks = (last - first + IoPipeline::kChunk - 1) / IoPipeline::kChunk;
  auto chunk_begin = [&](int64_t i) { return first + i * IoPipeline::kChunk; };
  auto chunk_len = [&](int64_t i) { return std::min(IoPipeline::kChunk, last - chunk_begin(i)); };
  auto submit = [&](int64_t i) {
    const int slot = static_cast<int>(i % IoPipeline::kSlots);
    io.submit(slot, fd, false, io.buffer(slot), chunk_len(i), chunk_begin(i));
  };
  for (int64_t i = 0; i < std::min<int64_t>(chunks, IoPipeline::kSlots); ++i) submit(i);
  for (int64_t i = 0; i < chunks; ++i) {
    const int slot = static_cast<int>(i % IoPipeline::kSlots);
    const int64_t begin = chunk_begin(i);
    const int64_t use_from = std::max(begin, offset), use_to = std::min(begin + chunk_len(i), end);
    auto t = IoClock::now();
    const IoPipeline::Result r = io.wait(slot);
    stats_.wait_seconds += seconds_since(t);
    if (r.done < use_to - begin) {
      io.drain();  // no request may still fill a buffer
      if (direct && r.err == EINVAL) {
        // The device wants a larger alignment than 4 KiB: buffered from here on.
        file_system().close(direct_fd_);
        direct_fd_ = -1;
        return stream(buffered_fd_, false, use_from, end - use_from, sink);
      }
      if (r.err != 0)
        MPIACCEL_THROW("cannot read " + std::to_string(chunk_len(i)) + " bytes at offset " +
                       std::to_string(begin) + " of checkpoint " + path_ + ": " +
                       std::strerror(r.err));
      MPIACCEL_THROW("checkpoint " + path_ + " ends at byte " + std::to_string(begin + r.done) +
                     " but its tensor data reaches byte " + std::to_string(end) +
                     ": the file is truncated");
    }
    (direct ? stats_.direct_bytes : stats_.buffered_bytes) += use_to - use_from;
    t = IoClock::now();
    sink(io.buffer(slot) + (use_from - begin), use_to - use_from);
    stats_.sink_seconds += seconds_since(t);
    if (i + IoPipeline::kSlots < chunks) submit(i + IoPipeline::kSlots);
  }
}

}  // namespace mpiaccel::detail
