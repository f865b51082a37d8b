// ctest: links mpiaccel
// safetensors: what the writer writes the reader reads back exactly; a file
// whose header lies is refused with one line naming the file and the lie,
// before any tensor is read.
#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "interop/safetensors.hpp"
#include "mpiaccel/error.hpp"
#include "support/scratch_dir.hpp"

using namespace mpiaccel::detail;

namespace {

// A file of `header` (as given) and `data_bytes` zero bytes.
std::string file_with_header(const mpiaccel::test::TempDir& dir, const std::string& header,
                             int64_t data_bytes, uint64_t claimed_length = 0) {
  const std::string path = dir.file("lying.safetensors");
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  const uint64_t length = claimed_length ? claimed_length : header.size();
  for (int i = 0; i < 8; ++i) file.put(static_cast<char>((length >> (8 * i)) & 0xff));
  file << header << std::string(static_cast<size_t>(data_bytes), '\0');
  return path;
}

void expect_refused(const std::string& path, const std::string& why) {
  try {
    SafetensorsFile::open(path);
    BOOST_ERROR("accepted a file whose header lies: " << why);
  } catch (const mpiaccel::Error& e) {
    BOOST_TEST_MESSAGE(e.message());
    BOOST_TEST(e.message().find("is not a valid safetensors file") != std::string::npos, e.message());
    BOOST_TEST(e.message().find(why) != std::string::npos, e.message());
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(what_is_written_reads_back_exactly) {
  mpiaccel::test::TempDir dir;
  const at::Tensor a = at::randn({3, 5});
  const at::Tensor b = at::arange(7, at::kLong);
  const at::Tensor c = at::randn({2, 2}).to(at::kBFloat16);
  std::vector<SafetensorsItem> items;
  for (const auto& [name, t] : {std::make_pair(std::string("a"), a), std::make_pair(std::string("b"), b),
                                std::make_pair(std::string("c.t"), c)})
    items.push_back({name, t.scalar_type(), t.sizes().vec(), [t = t] { return t; }});
  const std::string path = dir.file("x.safetensors");
  write_safetensors(path, items, {{"format", "pt"}});
  const SafetensorsFile file = SafetensorsFile::open(path);
  BOOST_TEST(file.entries.size() == 3u);
  BOOST_TEST(file.metadata.at("format") == "pt");
  BOOST_TEST(file.read(*file.find("a")).equal(a));
  BOOST_TEST(file.read(*file.find("b")).equal(b));
  BOOST_TEST(file.read(*file.find("c.t")).equal(c));
  BOOST_TEST(file.data_start % 8 == 0);
}

BOOST_AUTO_TEST_CASE(lying_headers_are_refused) {
  mpiaccel::test::TempDir dir;
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  expect_refused(file_with_header(dir, ok, 16, uint64_t{1} << 40), "its header claims 1099511627776 bytes");
  expect_refused(file_with_header(dir, "not json", 0), "its header is not JSON");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 8),
                 "outside the 8 data bytes");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", 4),
                 "unknown dtype");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})", 16),
                 "impossible shape");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                 "bad dimension");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                 "needs another number");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
                 "outside the 8 data bytes");
  expect_refused(file_with_header(dir, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                 "overlap");
  expect_refused(file_with_header(dir, R"({"w":{"dtype":"F32"}})", 0), "lacks dtype, shape or data_offsets");
  expect_refused(file_with_header(dir, "[1,2]", 0), "not a JSON object");
}
