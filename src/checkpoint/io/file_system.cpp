// The real FileSystem: the system calls themselves (see file_system.hpp).

#include "checkpoint/io/file_system.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace mpiaccel::detail {
namespace {

class PosixFileSystem final : public FileSystem {
 public:
  int open(const char* path, int flags, mode_t mode) override { return ::open(path, flags, mode); }
  ssize_t pwrite(int fd, const void* data, size_t bytes, off_t offset) override {
    return ::pwrite(fd, data, bytes, offset);
  }
  ssize_t pread(int fd, void* data, size_t bytes, off_t offset) override {
    return ::pread(fd, data, bytes, offset);
  }
  ssize_t write(int fd, const void* data, size_t bytes) override { return ::write(fd, data, bytes); }
  int fsync(int fd) override { return ::fsync(fd); }
  int fdatasync(int fd) override { return ::fdatasync(fd); }
  int fallocate(int fd, off_t offset, off_t bytes) override { return ::posix_fallocate(fd, offset, bytes); }
  int rename(const char* from, const char* to) override { return ::rename(from, to); }
  int unlink(const char* path) override { return ::unlink(path); }
  int close(int fd) override { return ::close(fd); }
  int mkdir(const char* path, mode_t mode) override { return ::mkdir(path, mode); }
};

std::atomic<FileSystem*> installed{nullptr};

}  // namespace

FileSystem& real_file_system() {
  static PosixFileSystem real;
  return real;
}

FileSystem& file_system() {
  FileSystem* fs = installed.load(std::memory_order_acquire);
  return fs ? *fs : real_file_system();
}

FileSystem* replace_file_system(FileSystem* replacement) {
  return installed.exchange(replacement, std::memory_order_acq_rel);
}

}  // namespace mpiaccel::detail
