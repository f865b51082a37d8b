#pragma once
// Every system call of the checkpoint path goes through one FileSystem, as
// leveldb's reads and writes go through its Env: the real one, or one a test
// installs to inject a fault at any call (ENOSPC, EIO, a short write, a
// failing fsync or rename). The calls keep POSIX's contract: -1 and errno on
// failure (fallocate returns the error, as posix_fallocate does).
//
// Not reachable through it: the I/O that HDF5 does itself (the file's
// creation, its metadata and the small datasets, through Open MPI's MPI-IO
// on save and the sec2 driver in rank 0's manifest read). Those happen inside
// HDF5 and Open MPI; their failures surface as HDF5 errors, which the save
// and load agree on like any other (docs/checkpoint.md, "Injected faults").

#include <sys/types.h>

#include <cstddef>

namespace mpiaccel::detail {

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual int open(const char* path, int flags, mode_t mode) = 0;
  virtual ssize_t pwrite(int fd, const void* data, size_t bytes, off_t offset) = 0;
  virtual ssize_t pread(int fd, void* data, size_t bytes, off_t offset) = 0;
  virtual ssize_t write(int fd, const void* data, size_t bytes) = 0;
  virtual int fsync(int fd) = 0;  // also a directory's
  virtual int fdatasync(int fd) = 0;
  virtual int fallocate(int fd, off_t offset, off_t bytes) = 0;  // returns the error
  virtual int rename(const char* from, const char* to) = 0;
  virtual int unlink(const char* path) = 0;
  virtual int close(int fd) = 0;
  virtual int mkdir(const char* path, mode_t mode) = 0;
};

/// The process's FileSystem: the real one unless a test replaced it.
FileSystem& file_system();
/// The real one, for a test's FileSystem to forward to.
FileSystem& real_file_system();
/// For tests: makes `replacement` the process's FileSystem (nullptr: the real
/// one again) and returns the one it replaces. Not while a save or load runs.
FileSystem* replace_file_system(FileSystem* replacement);

}  // namespace mpiaccel::detail
