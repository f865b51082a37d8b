#pragma once
// A rank's tensor bytes, written straight into the checkpoint file at the
// addresses HDF5 allocated for them (H5Dget_offset of a contiguous dataset
// allocated early), while HDF5 keeps the file open but never writes those
// ranges. HDF5 with a memory type equal to the file type would write exactly
// these bytes; doing it here lets the bulk of them go with O_DIRECT, which on
// this kind of machine is several times faster than filling the page cache,
// and lets the CRC32C be computed on the staged copy, off the disk's critical
// path (docs/checkpoint.md, "Save speed").

#include <cstdint>
#include <memory>
#include <string>

namespace mpiaccel::detail {

class IoPipeline;

/// False when MPIACCEL_CKPT_DIRECT_IO=0: every tensor transfer of a save or a
/// load then goes through the page cache.
bool direct_io_enabled();

/// Reserves the file's first `bytes` bytes on the disk in one request
/// (posix_fallocate), before the ranks write their rows into it. Without it,
/// ranks writing their pieces at once make the file system allocate the
/// blocks in the order the writes land: on ext4 a 512 MiB checkpoint written
/// by 2 ranks came out in 33 extents out of order and read back at 0.73 GB/s,
/// against 1.1 GB/s for a sequentially written file (docs/checkpoint.md).
/// Also finds a full disk before any tensor byte is written. A file system
/// that cannot preallocate (EOPNOTSUPP, EINVAL) is left as it is. Throws on
/// ENOSPC and other errors.
void preallocate_file(const std::string& path, int64_t bytes);

class RawWriter {
 public:
  /// Time spent by the calling thread, for the save's debug log.
  struct Stats {
    double copy_crc_seconds = 0;  // staging copies and CRC32C
    double wait_seconds = 0;      // waiting for the disk
    double sync_seconds = 0;
    int64_t direct_bytes = 0, buffered_bytes = 0;
  };

  /// Opens an existing file for writing: once buffered, and once with
  /// O_DIRECT where the file system allows it and
  /// MPIACCEL_CKPT_DIRECT_IO is not 0.
  explicit RawWriter(const std::string& path);
  ~RawWriter();
  RawWriter(const RawWriter&) = delete;
  RawWriter& operator=(const RawWriter&) = delete;

  /// Writes `bytes` bytes at file offset `offset` and returns their CRC32C.
  /// The 4 KiB-aligned middle goes with O_DIRECT through the staging ring of
  /// an IoPipeline (straight from `data` where that is aligned too): the
  /// checksum and the copy of one chunk overlap the writes of the previous
  /// ones. The edges, and everything on file systems without O_DIRECT, go
  /// through the page cache. Throws with the errno text.
  uint32_t write(const void* data, int64_t bytes, int64_t offset);
  /// fdatasync, then close: on return the bytes written here, and whatever
  /// this node's page cache holds of the file, are on the disk. Throws.
  void sync_and_close();
  bool direct() const { return direct_fd_ >= 0; }
  const Stats& stats() const { return stats_; }

 private:
  void write_fd(int fd, const char* data, int64_t bytes, int64_t offset);
  uint32_t write_direct(const char* data, int64_t bytes, int64_t offset, uint32_t crc);
  void close_all();

  std::string path_;
  int buffered_fd_ = -1, direct_fd_ = -1;
  std::unique_ptr<IoPipeline> pipeline_;  // created at the first O_DIRECT write
  Stats stats_;
};

}  // namespace mpiaccel::detail
