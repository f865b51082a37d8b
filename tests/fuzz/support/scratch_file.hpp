#pragma once
// A file the harnesses of file readers write each input into: one per
// process, in a private directory under /dev/shm (memory, no disk traffic),
// removed at exit.

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace mpiaccel::fuzz {

struct ScratchDir {
  ScratchDir() {
    std::string pattern = (std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp") +
                          std::string("/mpiaccel_fuzz_XXXXXX");
    path = mkdtemp(pattern.data());
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string path;
};

inline const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

/// Writes `size` bytes to scratch_dir()/name and returns its path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

}  // namespace mpiaccel::fuzz
