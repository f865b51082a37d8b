#pragma once
// A rank's tensor bytes, written straight into the checkpoint file at the
// addresses HDF5 allocated for them (H5Dget_offset of a contiguous dataset
// allocated early), after HDF5 has closed the file. HDF5 with a memory type
// equal to the file type would write exactly these bytes; doing it here lets
// the bulk of them go with O_DIRECT, which on this kind of machine is several
// times faster than filling the page cache (docs/checkpoint.md, "Save speed").

#include <cstdint>
#include <string>

namespace mpiaccel::detail {

class RawWriter {
 public:
  /// Opens an existing file for writing: once buffered, and once with
  /// O_DIRECT where the file system allows it (not tmpfs, for example).
  explicit RawWriter(const std::string& path);
  ~RawWriter();
  RawWriter(const RawWriter&) = delete;
  RawWriter& operator=(const RawWriter&) = delete;

  /// Writes `bytes` bytes at file offset `offset`. The 4 KiB-aligned middle
  /// goes with O_DIRECT (through a double-buffered aligned staging area unless
  /// `data` is aligned there too: the copy of one chunk overlaps the write of
  /// the previous one, on a helper thread that makes no HDF5 call), the edges
  /// and everything on file systems without O_DIRECT through the page cache.
  /// Throws with the errno text.
  void write(const void* data, int64_t bytes, int64_t offset);
  /// fdatasync, then close: on return the bytes written here, and whatever
  /// this node's page cache holds of the file, are on the disk. Throws.
  void sync_and_close();
  bool direct() const { return direct_fd_ >= 0; }

 private:
  void write_fd(int fd, const char* data, int64_t bytes, int64_t offset);
  void write_direct(const char* data, int64_t bytes, int64_t offset);
  void close_all();

  std::string path_;
  int buffered_fd_ = -1, direct_fd_ = -1;
  char* stage_ = nullptr;  // two kStageBytes halves: one is copied into while the other is written
};

}  // namespace mpiaccel::detail
