#include "checkpoint/raw_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// O_DIRECT needs offsets, lengths and buffer addresses aligned to the
// device's logical block (512 B or 4 KiB); 4 KiB satisfies both.
constexpr int64_t kDirectAlign = 4096;
// Size of one O_DIRECT write from the staging buffer: large enough that the
// per-request cost vanishes, small enough to stay in the CPU cache's shadow.
constexpr int64_t kStageBytes = 8 << 20;

int64_t round_up(int64_t x) { return (x + kDirectAlign - 1) / kDirectAlign * kDirectAlign; }
int64_t round_down(int64_t x) { return x / kDirectAlign * kDirectAlign; }

}  // namespace

RawWriter::RawWriter(const std::string& path) : path_(path) {
  buffered_fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  MPIACCEL_CHECK(buffered_fd_ >= 0, "cannot open " + path + " to write tensor data: " +
                                        std::strerror(errno));
  // MPIACCEL_CKPT_DIRECT_IO=0 keeps every write in the page cache, for file
  // systems whose O_DIRECT is slow or unsafe (docs/checkpoint.md).
  const char* direct = std::getenv("MPIACCEL_CKPT_DIRECT_IO");
  if (direct && std::string(direct) == "0") return;
  direct_fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT);  // -1: not supported here
}

RawWriter::~RawWriter() {
  close_all();
  std::free(stage_);
}

void RawWriter::close_all() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (buffered_fd_ >= 0) ::close(buffered_fd_);
  direct_fd_ = buffered_fd_ = -1;
}

void RawWriter::write_fd(int fd, const char* data, int64_t bytes, int64_t offset) {
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, data, static_cast<size_t>(bytes), offset);
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

void RawWriter::write_direct(const char* data, int64_t bytes, int64_t offset) {
  // data, bytes and offset are multiples of kDirectAlign here except `data`.
  const bool aligned = reinterpret_cast<uintptr_t>(data) % kDirectAlign == 0;
  if (!aligned && !stage_) {
    void* p = nullptr;
    MPIACCEL_CHECK(::posix_memalign(&p, kDirectAlign, kStageBytes) == 0,
                   "out of memory for the checkpoint's 8 MiB write buffer");
    stage_ = static_cast<char*>(p);
  }
  while (bytes > 0) {
    const int64_t len = aligned ? bytes : std::min(bytes, kStageBytes);
    const char* from = data;
    if (!aligned) {
      std::memcpy(stage_, data, static_cast<size_t>(len));
      from = stage_;
    }
    const ssize_t n = ::pwrite(direct_fd_, from, static_cast<size_t>(len), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL) {
      // The device wants a larger alignment than 4 KiB: go buffered from here on.
      ::close(direct_fd_);
      direct_fd_ = -1;
      return write_fd(buffered_fd_, data, bytes, offset);
    }
    if (n <= 0 || n % kDirectAlign != 0) {
      // An error, or a short write (disk full) that the page cache can finish
      // or report: the buffered descriptor says which, with its errno.
      const int64_t done = std::max<ssize_t>(n, 0);
      return write_fd(buffered_fd_, data + done, bytes - done, offset + done);
    }
    data += n;
    bytes -= n;
    offset += n;
  }
}

void RawWriter::write(const void* data, int64_t bytes, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  const int64_t lo = round_up(offset), hi = round_down(offset + bytes);
  if (direct_fd_ < 0 || hi <= lo) return write_fd(buffered_fd_, p, bytes, offset);
  write_fd(buffered_fd_, p, lo - offset, offset);
  write_direct(p + (lo - offset), hi - lo, lo);
  write_fd(buffered_fd_, p + (hi - offset), offset + bytes - hi, hi);
}

void RawWriter::sync_and_close() {
  // One fdatasync covers both descriptors: O_DIRECT data is already on the
  // device, and the flush also empties the device's volatile cache.
  const int rc = ::fdatasync(buffered_fd_);
  const int err = errno;
  close_all();
  MPIACCEL_CHECK(rc == 0, "fdatasync of " + path_ + " failed: " + std::strerror(err));
}

}  // namespace mpiaccel::detail
