// Token files: the on-disk format (a 32-byte little-endian header, then the
// ids) and its memory-mapped reader. docs/data_and_models.md has the layout.
//
// Why mmap: a tokenized corpus can be far larger than a rank's memory, and
// every rank of a node reads the same file. Mapped read-only, the pages are
// shared through the page cache and only the windows a rank samples are
// paged in; nothing is copied per rank.

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "mpiaccel/token_data.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

// The ids are used in place, so the host must read little-endian integers as
// they are stored.
bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

uint32_t load_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint64_t load_u64(const unsigned char* p) {
  return static_cast<uint64_t>(load_u32(p)) | static_cast<uint64_t>(load_u32(p + 4)) << 32;
}

void store_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

void store_u64(unsigned char* p, uint64_t v) {
  store_u32(p, static_cast<uint32_t>(v));
  store_u32(p + 4, static_cast<uint32_t>(v >> 32));
}

int64_t dtype_limit(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? (int64_t{1} << 16) : (int64_t{1} << 32);
}

const char* dtype_name(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? "uint16" : "uint32";
}

const char* kRewriteHint =
    "rewrite it with `mpiaccel data tokenize` (or write_token_file), or point [train] data_dir "
    "at a directory of valid token files";

}  // namespace

TokenDtype token_dtype_for(int64_t vocab_size) {
  MPIACCEL_CHECK(vocab_size >= 1 && vocab_size <= dtype_limit(TokenDtype::kUint32),
                 "token vocabulary " + std::to_string(vocab_size) + " is not in [1, 2^32]");
  return vocab_size <= dtype_limit(TokenDtype::kUint16) ? TokenDtype::kUint16 : TokenDtype::kUint32;
}

void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int64_t vocab_size) {
  write_token_file(path, tokens, vocab_size, token_dtype_for(vocab_size));
}

void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int64_t vocab_size, TokenDtype dtype) {
  MPIACCEL_CHECK(dtype == TokenDtype::kUint16 || dtype == TokenDtype::kUint32,
                 "write_token_file: dtype must be uint16 or uint32");
  MPIACCEL_CHECK(vocab_size >= 1 && vocab_size <= dtype_limit(dtype),
                 "write_token_file " + path + ": vocabulary " + std::to_string(vocab_size) +
                     " does not fit " + dtype_name(dtype) + " ids");
  MPIACCEL_CHECK(host_is_little_endian(), "token files need a little-endian host");

  unsigned char header[kTokenFileHeaderBytes] = {};
  std::memcpy(header, kTokenFileMagic, 8);
  store_u32(header + 8, kTokenFileVersion);
  store_u32(header + 12, static_cast<uint32_t>(dtype));
  store_u64(header + 16, tokens.size());
  store_u64(header + 24, static_cast<uint64_t>(vocab_size));

  // Converted in blocks so a large corpus never needs a second full copy.
  const size_t width = static_cast<size_t>(dtype);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    MPIACCEL_CHECK(out.good(), "cannot create " + tmp + ": " + std::strerror(errno));
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    std::vector<unsigned char> block;
    constexpr size_t kBlock = 1 << 16;
    for (size_t first = 0; first < tokens.size(); first += kBlock) {
      const size_t n = std::min(kBlock, tokens.size() - first);
      block.resize(n * width);
      for (size_t i = 0; i < n; ++i) {
        const int64_t id = tokens[first + i];
        MPIACCEL_CHECK(id >= 0 && id < vocab_size,
                       "write_token_file " + path + ": token " + std::to_string(first + i) + " is " +
                           std::to_string(id) + ", not in [0, " + std::to_string(vocab_size) + ")");
        if (width == 2) {
          block[2 * i] = static_cast<unsigned char>(id);
          block[2 * i + 1] = static_cast<unsigned char>(id >> 8);
        } else {
          store_u32(block.data() + 4 * i, static_cast<uint32_t>(id));
        }
      }
      out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size()));
    }
    out.close();
    MPIACCEL_CHECK(!out.fail(), "cannot write " + tmp + ": " + std::strerror(errno));
  }
  MPIACCEL_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0,
                 "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
}

TokenFile::TokenFile(const std::string& path) : path_(path) {
  MPIACCEL_CHECK(host_is_little_endian(), "token file " + path + ": needs a little-endian host");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  MPIACCEL_CHECK(fd >= 0, "cannot open token file " + path + ": " + std::strerror(errno) +
                              "; make it with `mpiaccel data tokenize --output DIR` and set "
                              "[train] data_dir = DIR");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    MPIACCEL_THROW("cannot stat token file " + path + ": " + std::strerror(err));
  }
  const auto file_bytes = static_cast<int64_t>(st.st_size);
  if (file_bytes < kTokenFileHeaderBytes) {
    ::close(fd);
    MPIACCEL_THROW("token file " + path + " is truncated: " + std::to_string(file_bytes) +
                   " bytes, shorter than its " + std::to_string(kTokenFileHeaderBytes) +
                   "-byte header; " + kRewriteHint);
  }
  void* map = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_SHARED, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file open
  MPIACCEL_CHECK(map != MAP_FAILED,
                 "cannot map token file " + path + ": " + std::strerror(map_errno));
  map_ = static_cast<const unsigned char*>(map);
  map_bytes_ = static_cast<size_t>(file_bytes);

  // From here on a failed check must unmap: the destructor does not run for a
  // constructor that throws.
  try {
    const unsigned char* h = map_;
    if (std::memcmp(h, kTokenFileMagic, 8) != 0) {
      std::string seen;
      for (int i = 0; i < 8; ++i) {
        const char c = static_cast<char>(h[i]);
        seen += (c >= 0x20 && c < 0x7f) ? c : '?';
      }
      MPIACCEL_THROW("token file " + path + " has magic '" + seen + "', not '" + kTokenFileMagic +
                     "': it is not an mpiaccel token file; " + kRewriteHint);
    }
    const uint32_t version = load_u32(h + 8);
    MPIACCEL_CHECK(version == kTokenFileVersion,
                   "token file " + path + " has format version " + std::to_string(version) +
                       "; this mpiaccel reads version " + std::to_string(kTokenFileVersion) + "; " +
                       kRewriteHint);
    const uint32_t dtype = load_u32(h + 12);
    MPIACCEL_CHECK(dtype == 2 || dtype == 4,
                   "token file " + path + " has dtype code " + std::to_string(dtype) +
                       "; accepted: 2 (uint16), 4 (uint32); " + kRewriteHint);
    dtype_ = static_cast<TokenDtype>(dtype);
    const uint64_t count = load_u64(h + 16);
    const uint64_t vocab = load_u64(h + 24);
    MPIACCEL_CHECK(vocab >= 1 && vocab <= static_cast<uint64_t>(dtype_limit(dtype_)),
                   "token file " + path + " has vocabulary size " + std::to_string(vocab) +
                       ", which " + dtype_name(dtype_) + " ids cannot hold (1 to " +
                       std::to_string(dtype_limit(dtype_)) + "); " + kRewriteHint);
    const uint64_t data_bytes = static_cast<uint64_t>(file_bytes - kTokenFileHeaderBytes);
    const uint64_t width = dtype;
    if (count > data_bytes / width) {
      MPIACCEL_THROW("token file " + path + " is truncated: its header says " +
                     std::to_string(count) + " " + dtype_name(dtype_) + " tokens (" +
                     std::to_string(kTokenFileHeaderBytes + count * width) + " bytes) but it has " +
                     std::to_string(file_bytes) + " bytes; " + kRewriteHint);
    }
    MPIACCEL_CHECK(count * width == data_bytes,
                   "token file " + path + " has " + std::to_string(file_bytes) +
                       " bytes, more than its header's " + std::to_string(count) + " " +
                       dtype_name(dtype_) + " tokens (" +
                       std::to_string(kTokenFileHeaderBytes + count * width) +
                       " bytes): the count does not match the file size; " + kRewriteHint);
    count_ = static_cast<int64_t>(count);
    vocab_size_ = static_cast<int64_t>(vocab);
  } catch (...) {
    ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    map_ = nullptr;
    throw;
  }
  // Windows are read at random places: tell the kernel not to read ahead.
  ::madvise(const_cast<unsigned char*>(map_), map_bytes_, MADV_RANDOM);
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void TokenFile::read(int64_t start, int64_t count, int64_t* out) const {
  MPIACCEL_CHECK(start >= 0 && count >= 0 && start <= count_ - count,
                 "token file " + path_ + ": ids [" + std::to_string(start) + ", " +
                     std::to_string(start + count) + ") are not in [0, " + std::to_string(count_) +
                     ")");
  const unsigned char* data = map_ + kTokenFileHeaderBytes;
  if (dtype_ == TokenDtype::kUint16) {
    // The header is 32 bytes, so ids are naturally aligned in the mapping.
    const auto* ids = reinterpret_cast<const uint16_t*>(data) + start;
    for (int64_t i = 0; i < count; ++i) out[i] = ids[i];
  } else {
    const auto* ids = reinterpret_cast<const uint32_t*>(data) + start;
    for (int64_t i = 0; i < count; ++i) out[i] = ids[i];
  }
  for (int64_t i = 0; i < count; ++i) {
    MPIACCEL_CHECK(out[i] < vocab_size_,
                   "token file " + path_ + ": token " + std::to_string(start + i) + " is " +
                       std::to_string(out[i]) + ", not below the header's vocabulary " +
                       std::to_string(vocab_size_) + "; " + kRewriteHint);
  }
}

at::Tensor TokenFile::slice(int64_t start, int64_t count) const {
  at::Tensor out = at::empty({count}, at::kLong);
  read(start, count, out.data_ptr<int64_t>());
  return out;
}

}  // namespace mpiaccel
