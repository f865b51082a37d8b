#include "checkpoint/raw_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>

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

// One O_DIRECT write of `len` aligned bytes: how many were written before an
// error or a short write (then `*err` is the errno, 0 for a short write).
int64_t pwrite_direct(int fd, const char* from, int64_t len, int64_t offset, int* err) {
  int64_t done = 0;
  *err = 0;
  while (done < len) {
    const ssize_t n = ::pwrite(fd, from + done, static_cast<size_t>(len - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) *err = errno;
    if (n <= 0 || n % kDirectAlign != 0) return done + std::max<ssize_t>(n, 0);
    done += n;
  }
  return done;
}

void RawWriter::write_direct(const char* data, int64_t bytes, int64_t offset) {
  // data, bytes and offset are multiples of kDirectAlign here except `data`.
  const bool aligned = reinterpret_cast<uintptr_t>(data) % kDirectAlign == 0;
  // A chunk that did not go through whole: EINVAL means the device wants a
  // larger alignment than 4 KiB (go buffered from here on); other errors and
  // short writes (disk full) are finished or reported, with their errno, by
  // the buffered descriptor.
  auto fall_back = [&](int64_t from, int err) {
    if (err == EINVAL) {
      ::close(direct_fd_);
      direct_fd_ = -1;
    }
    write_fd(buffered_fd_, data + from, bytes - from, offset + from);
  };
  if (aligned) {
    int err = 0;
    const int64_t done = pwrite_direct(direct_fd_, data, bytes, offset, &err);
    if (done < bytes) fall_back(done, err);
    return;
  }
  if (!stage_) {
    void* p = nullptr;
    MPIACCEL_CHECK(::posix_memalign(&p, kDirectAlign, 2 * kStageBytes) == 0,
                   "out of memory for the checkpoint's 2 x 8 MiB write buffer");
    stage_ = static_cast<char*>(p);
  }
  struct Chunk {
    int64_t begin = 0, len = 0, done = 0;
    int err = 0;
  };
  std::future<Chunk> in_flight;
  // Waits for the chunk in flight; false (after falling back) if it failed.
  auto finish = [&]() {
    if (!in_flight.valid()) return true;
    const Chunk c = in_flight.get();
    if (c.done == c.len) return true;
    fall_back(c.begin + c.done, c.err);
    return false;
  };
  int half = 0;
  for (int64_t begin = 0; begin < bytes; begin += kStageBytes, half ^= 1) {
    const int64_t len = std::min(bytes - begin, kStageBytes);
    char* stage = stage_ + half * kStageBytes;
    std::memcpy(stage, data + begin, static_cast<size_t>(len));  // overlaps the write in flight
    if (!finish()) return;
    in_flight = std::async(std::launch::async, [fd = direct_fd_, stage, begin, len, offset] {
      Chunk c{begin, len};
      c.done = pwrite_direct(fd, stage, len, offset + begin, &c.err);
      return c;
    });
  }
  finish();
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
