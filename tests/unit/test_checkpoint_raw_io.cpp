// ctest: links mpiaccel; timeout 120
// The raw tensor I/O under the checkpoint's save and load: RawWriter (CRC32C
// computed on the staged copy, O_DIRECT middle, buffered edges), RawReader
// (O_DIRECT reads widened to 4 KiB blocks, read-ahead) and
// read_rows_verified (shard CRCs checked on the fly), on a disk file system
// (O_DIRECT), on tmpfs and with MPIACCEL_CKPT_DIRECT_IO=0 (buffered); a
// flipped byte and a truncated file are caught.
#define BOOST_TEST_MODULE checkpoint_raw_io
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/crc32c.hpp"
#include "checkpoint/load/raw_reader.hpp"
#include "checkpoint/save/raw_writer.hpp"
#include "checkpoint/load/tensor_io.hpp"
#include "mpiaccel/error.hpp"

namespace fs = std::filesystem;
using namespace mpiaccel;
using namespace mpiaccel::detail;

namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& dir) {
    std::string tmpl = dir + "/mpiaccel_raw_io_XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    BOOST_REQUIRE(fd >= 0);
    ::close(fd);
    path = name.data();
  }
  ~TempFile() { ::unlink(path.c_str()); }
};

std::vector<char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<char> out(n);
  for (auto& c : out) c = static_cast<char>(gen());
  return out;
}

std::vector<char> file_bytes(const std::string& path, int64_t offset, int64_t n) {
  std::vector<char> out(static_cast<size_t>(n));
  const int fd = ::open(path.c_str(), O_RDONLY);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(::pread(fd, out.data(), out.size(), offset) == static_cast<ssize_t>(n));
  ::close(fd);
  return out;
}

// Odd sizes and offsets: unaligned head and tail, more chunks than staging
// slots, a source address off the 4 KiB grid (the staging path).
struct Piece {
  int64_t offset, bytes;
  size_t source_shift;
};
const std::vector<Piece> kPieces = {
    {17, 100, 3},                      // smaller than a block: all buffered
    {4096 * 3 + 5, 4096 * 2, 1},       // two unaligned edges around one block
    {1 << 20, 21 * (1 << 20) + 333, 64},  // 5+ chunks through the staging ring
    {30 << 20, 9 << 20, 0},            // an aligned source: no staging copy
};

// Writes kPieces into `path`; checks the returned CRCs and the file bytes.
void write_and_check(const std::string& path, bool expect_direct) {
  std::vector<std::vector<char>> sources;
  {
    RawWriter writer(path);
    BOOST_TEST(writer.direct() == expect_direct);
    unsigned seed = 1;
    for (const auto& p : kPieces) {
      // Room for the shift in an aligned allocation.
      std::vector<char> data = random_bytes(static_cast<size_t>(p.bytes), seed++);
      void* block = nullptr;
      BOOST_REQUIRE(::posix_memalign(&block, 4096, data.size() + 4096) == 0);
      char* at = static_cast<char*>(block) + p.source_shift;
      std::memcpy(at, data.data(), data.size());
      const uint32_t crc = writer.write(at, p.bytes, p.offset);
      std::free(block);
      BOOST_TEST(crc == crc32c(0, data.data(), data.size()));
      sources.push_back(std::move(data));
    }
    writer.sync_and_close();
    BOOST_TEST((writer.stats().direct_bytes > 0) == expect_direct);
  }
  for (size_t i = 0; i < kPieces.size(); ++i)
    BOOST_TEST((file_bytes(path, kPieces[i].offset, kPieces[i].bytes) == sources[i]));
}

void read_and_check(const std::string& path, bool expect_direct) {
  RawReader reader(path);
  BOOST_TEST(reader.direct() == expect_direct);
  for (const auto& p : kPieces) {
    std::vector<char> got;
    reader.read(p.offset, p.bytes, [&](const char* data, int64_t n) {
      BOOST_REQUIRE(n > 0);
      got.insert(got.end(), data, data + n);
    });
    BOOST_TEST((got == file_bytes(path, p.offset, p.bytes)));
  }
  BOOST_TEST((reader.stats().direct_bytes > 0) == expect_direct);
}

bool o_direct_works(const std::string& dir) {
  TempFile f(dir);
  const int fd = ::open(f.path.c_str(), O_RDONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

struct DirectIoOff {
  DirectIoOff() { ::setenv("MPIACCEL_CKPT_DIRECT_IO", "0", 1); }
  ~DirectIoOff() { ::unsetenv("MPIACCEL_CKPT_DIRECT_IO"); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(disk_file_system_uses_o_direct) {
  const std::string dir = fs::temp_directory_path().string();
  BOOST_REQUIRE_MESSAGE(o_direct_works(dir), dir + " refuses O_DIRECT; this test needs a disk");
  TempFile f(dir);
  write_and_check(f.path, true);
  read_and_check(f.path, true);
}

BOOST_AUTO_TEST_CASE(opt_out_goes_through_the_page_cache) {
  DirectIoOff off;
  TempFile f(fs::temp_directory_path().string());
  write_and_check(f.path, false);
  read_and_check(f.path, false);
}

// tmpfs takes O_DIRECT from Linux 6.6 on and refuses it before: either way
// the writer and reader follow what the open gave them. (A refused open is
// the same state as the opt-out above: no O_DIRECT descriptor.)
BOOST_AUTO_TEST_CASE(tmpfs_with_or_without_o_direct) {
  BOOST_REQUIRE(fs::is_directory("/dev/shm"));
  const bool direct = o_direct_works("/dev/shm");
  BOOST_TEST_MESSAGE("tmpfs O_DIRECT: " << direct);
  TempFile f("/dev/shm");
  write_and_check(f.path, direct);
  read_and_check(f.path, direct);
}

BOOST_AUTO_TEST_CASE(a_read_past_the_end_says_truncated) {
  TempFile f(fs::temp_directory_path().string());
  write_and_check(f.path, true);
  const int64_t size = static_cast<int64_t>(fs::file_size(f.path));
  for (bool direct : {true, false}) {
    std::unique_ptr<DirectIoOff> off;
    if (!direct) off = std::make_unique<DirectIoOff>();
    RawReader reader(f.path);
    try {
      reader.read(size - 1000, 5000, [](const char*, int64_t) {});
      BOOST_FAIL("a read past the end did not throw");
    } catch (const Error& e) {
      BOOST_TEST_MESSAGE(e.message());
      BOOST_TEST(e.message().find("truncated") != std::string::npos);
      BOOST_TEST(e.message().find(f.path) != std::string::npos);
    }
  }
}

// A [70, 1000] float tensor saved in three shards; rows are read back across
// shard boundaries, every covering shard is checked, a flipped byte is
// named, with O_DIRECT and without.
BOOST_AUTO_TEST_CASE(read_rows_verified_checks_covering_shards) {
  TempFile f(fs::temp_directory_path().string());
  const int64_t rows = 70, cols = 1000, row_bytes = cols * 4, base = 1 << 20;
  at::Tensor full = at::rand({rows, cols});
  TensorInfo info;
  info.name = "model/w";
  info.shape = {rows, cols};
  info.dtype = at::kFloat;
  info.bytes = rows * row_bytes;
  const std::vector<std::pair<int64_t, int64_t>> shards = {{0, 30}, {30, 25}, {55, 15}};
  {
    RawWriter writer(f.path);
    for (size_t i = 0; i < shards.size(); ++i) {
      const auto [first, n] = shards[i];
      const uint32_t crc =
          writer.write(static_cast<const char*>(full.data_ptr()) + first * row_bytes, n * row_bytes,
                       base + first * row_bytes);
      info.shards.push_back({static_cast<int>(i), first, n, crc});
    }
    writer.sync_and_close();
  }
  for (bool direct : {true, false}) {
    std::unique_ptr<DirectIoOff> off;
    if (!direct) off = std::make_unique<DirectIoOff>();
    RawReader reader(f.path);
    for (auto [first, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 70}, {10, 40}, {56, 3}, {30, 25}}) {
      at::Tensor out = at::zeros({n, cols});
      const std::string damage =
          read_rows_verified(reader, base, info, first, n, out.data_ptr(), f.path);
      BOOST_TEST(damage == "");
      BOOST_TEST(at::equal(out, full.narrow(0, first, n)));
    }
  }
  // One flipped bit in row 40 (shard 1): a read of rows 50..52 covers shard 1.
  {
    const int fd = ::open(f.path.c_str(), O_RDWR);
    char c = 0;
    const int64_t where = base + 40 * row_bytes + 123;
    BOOST_REQUIRE(::pread(fd, &c, 1, where) == 1);
    c = static_cast<char>(c ^ 0x10);
    BOOST_REQUIRE(::pwrite(fd, &c, 1, where) == 1);
    ::fsync(fd);
    ::close(fd);
  }
  for (bool direct : {true, false}) {
    std::unique_ptr<DirectIoOff> off;
    if (!direct) off = std::make_unique<DirectIoOff>();
    RawReader reader(f.path);
    at::Tensor out = at::zeros({3, cols});
    const std::string damage = read_rows_verified(reader, base, info, 50, 3, out.data_ptr(), f.path);
    BOOST_TEST_MESSAGE(damage);
    BOOST_TEST(damage.find("damaged") != std::string::npos);
    BOOST_TEST(damage.find("rows [30, 55)") != std::string::npos);
    BOOST_TEST(damage.find("rank 1") != std::string::npos);
    // Rows in the intact shards still verify.
    at::Tensor head = at::zeros({30, cols});
    BOOST_TEST(read_rows_verified(reader, base, info, 0, 30, head.data_ptr(), f.path) == "");
  }
}
