#include "checkpoint/save/raw_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "checkpoint/io/file_system.hpp"
#include "core/crc32c.hpp"
#include "checkpoint/io/io_pipeline.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// Copies and checksums in pieces small enough to stay in the L2 cache, so the
// CRC reads what the copy just wrote instead of a second pass over memory.
constexpr size_t kFusePiece = 256 << 10;

uint32_t copy_with_crc(char* to, const char* from, size_t bytes, uint32_t crc) {
  for (size_t done = 0; done < bytes; done += kFusePiece) {
    const size_t n = std::min(kFusePiece, bytes - done);
    std::memcpy(to + done, from + done, n);
    crc = crc32c(crc, to + done, n);
  }
  return crc;
}

}  // namespace

bool direct_io_enabled() {
  // MPIACCEL_CKPT_DIRECT_IO=0 keeps every transfer in the page cache, for
  // file systems whose O_DIRECT is slow or unsafe (docs/checkpoint.md).
  const char* direct = std::getenv("MPIACCEL_CKPT_DIRECT_IO");
  return !(direct && std::string(direct) == "0");
}

void preallocate_file(const std::string& path, int64_t bytes) {
  if (bytes <= 0) return;
  const int fd = file_system().open(path.c_str(), O_WRONLY | O_CLOEXEC, 0);
  MPIACCEL_CHECK(fd >= 0, "cannot open " + path + " to reserve its space: " + std::strerror(errno));
  const int rc = file_system().fallocate(fd, 0, bytes);  // returns the error, sets no errno
  file_system().close(fd);
  if (rc == 0 || rc == EOPNOTSUPP || rc == EINVAL) return;
  MPIACCEL_CHECK(rc != ENOSPC, "cannot reserve " + std::to_string(bytes) + " bytes for " + path +
                                   ": the disk is full (" + std::strerror(ENOSPC) +
                                   "); free space or point [checkpoint] dir elsewhere (the "
                                   "previous checkpoint is untouched)");
  MPIACCEL_THROW("cannot reserve " + std::to_string(bytes) + " bytes for " + path + ": " +
                 std::strerror(rc));
}

RawWriter::RawWriter(const std::string& path) : path_(path) {
  buffered_fd_ = file_system().open(path.c_str(), O_WRONLY | O_CLOEXEC, 0);
  MPIACCEL_CHECK(buffered_fd_ >= 0, "cannot open " + path + " to write tensor data: " +
                                        std::strerror(errno));
  if (direct_io_enabled())
    direct_fd_ = file_system().open(path.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT, 0);  // -1: not supported here
}

RawWriter::~RawWriter() {
  pipeline_.reset();  // waits for writes in flight before the descriptors close
  close_all();
}

void RawWriter::close_all() {
  if (direct_fd_ >= 0) file_system().close(direct_fd_);
  if (buffered_fd_ >= 0) file_system().close(buffered_fd_);
  direct_fd_ = buffered_fd_ = -1;
}

void RawWriter::write_fd(int fd, const char* data, int64_t bytes, int64_t offset) {
  stats_.buffered_bytes += fd == buffered_fd_ ? bytes : 0;
  while (bytes > 0) {
    const ssize_t n = file_system().pwrite(fd, data, static_cast<size_t>(bytes), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      MPIACCEL_THROW("cannot write " + std::to_string(bytes) + " bytes at offset " +
                     std::to_string(offset) + " of " + path_ + ": " + std::strerror(err));
    }
    data += n;
    bytes -= n;
    offset += n;
  }
}

uint32_t RawWriter::write_direct(const char* data, int64_t bytes, int64_t offset, uint32_t crc) {
  // bytes and offset are multiples of kDirectAlign here; data may not be.
  if (!pipeline_) pipeline_ = std::make_unique<IoPipeline>();
  IoPipeline& io = *pipeline_;
  const bool aligned = reinterpret_cast<uintptr_t>(data) % kDirectAlign == 0;
  int64_t begins[IoPipeline::kSlots] = {}, lens[IoPipeline::kSlots] = {};
  bool pending[IoPipeline::kSlots] = {};
  // A chunk that did not go through whole is finished, after the others, by
  // the buffered descriptor: EINVAL means the device wants a larger alignment
  // than 4 KiB (then no more O_DIRECT); other errors and short writes (disk
  // full) are reported there with their errno.
  std::vector<std::pair<int64_t, int64_t>> redo;
  bool failed = false, einval = false;
  auto reap = [&](int slot) {
    if (!pending[slot]) return;
    const auto t = IoClock::now();
    const IoPipeline::Result r = io.wait(slot);
    stats_.wait_seconds += seconds_since(t);
    pending[slot] = false;
    if (r.done == lens[slot]) return;
    redo.emplace_back(begins[slot] + align_down(r.done), begins[slot] + lens[slot]);
    failed = true;
    einval |= r.err == EINVAL;
  };
  int64_t begin = 0;
  for (int i = 0; begin < bytes; begin += IoPipeline::kChunk, ++i) {
    const int slot = i % IoPipeline::kSlots;
    reap(slot);
    if (failed) break;
    const int64_t len = std::min(bytes - begin, IoPipeline::kChunk);
    const auto t = IoClock::now();
    char* from = io.buffer(slot);
    if (aligned) {
      from = const_cast<char*>(data + begin);  // only read by pwrite
      crc = crc32c(crc, from, static_cast<size_t>(len));
    } else {
      crc = copy_with_crc(from, data + begin, static_cast<size_t>(len), crc);
    }
    stats_.copy_crc_seconds += seconds_since(t);
    begins[slot] = begin;
    lens[slot] = len;
    pending[slot] = true;
    io.submit(slot, direct_fd_, true, from, len, offset + begin);
    stats_.direct_bytes += len;
  }
  for (int s = 0; s < IoPipeline::kSlots; ++s) reap(s);
  if (einval) {
    file_system().close(direct_fd_);
    direct_fd_ = -1;
  }
  for (const auto& [from, to] : redo) write_fd(buffered_fd_, data + from, to - from, offset + from);
  if (begin < bytes) {  // not staged because a chunk failed
    crc = crc32c(crc, data + begin, static_cast<size_t>(bytes - begin));
    write_fd(buffered_fd_, data + begin, bytes - begin, offset + begin);
  }
  return crc;
}

uint32_t RawWriter::write(const void* data, int64_t bytes, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  const int64_t lo = align_up(offset), hi = align_down(offset + bytes);
  if (direct_fd_ < 0 || hi <= lo) {
    const auto t = IoClock::now();
    const uint32_t crc = crc32c(0, p, static_cast<size_t>(bytes));
    stats_.copy_crc_seconds += seconds_since(t);
    write_fd(buffered_fd_, p, bytes, offset);
    return crc;
  }
  uint32_t crc = crc32c(0, p, static_cast<size_t>(lo - offset));
  write_fd(buffered_fd_, p, lo - offset, offset);
  crc = write_direct(p + (lo - offset), hi - lo, lo, crc);
  crc = crc32c(crc, p + (hi - offset), static_cast<size_t>(offset + bytes - hi));
  write_fd(buffered_fd_, p + (hi - offset), offset + bytes - hi, hi);
  return crc;
}

void RawWriter::sync_and_close() {
  pipeline_.reset();
  // One fdatasync covers both descriptors: O_DIRECT data is already on the
  // device, and the flush also empties the device's volatile cache.
  const auto t = IoClock::now();
  const int rc = file_system().fdatasync(buffered_fd_);
  const int err = errno;
  stats_.sync_seconds += seconds_since(t);
  close_all();
  MPIACCEL_CHECK(rc == 0, "fdatasync of " + path_ + " failed: " + std::strerror(err));
}

}  // namespace mpiaccel::detail
