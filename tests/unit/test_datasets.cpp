// ctest: links mpiaccel; timeout 120
#define BOOST_TEST_MODULE datasets
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

namespace fs = std::filesystem;
using mpiaccel::Batch;
using mpiaccel::Error;

#include "support/scratch_dir.hpp"

using mpiaccel::test::contains;
using mpiaccel::test::message_of;
using mpiaccel::test::TempDir;

namespace {

}  // namespace

BOOST_AUTO_TEST_CASE(corpus_skips_indexes_hidden_files_directories_and_duplicate_links) {
  TempDir dir;
  dir.write("b", "BBB");
  dir.write("a", "AA");
  dir.write("a.dat", "index");
  dir.write(".hidden", "x");
  fs::create_directory(dir.path / "sub");
  std::ofstream(dir.path / "sub" / "c") << "C";
  fs::create_symlink("a", dir.path / "a.u8");       // Debian's *.u8 links
  fs::create_symlink("sub", dir.path / "sublink");  // a link to a directory
  fs::create_symlink("missing", dir.path / "dangling");

  at::Tensor bytes = mpiaccel::read_text_corpus(dir.path.string());
  BOOST_TEST(bytes.scalar_type() == at::kByte);
  const std::string text(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                         static_cast<size_t>(bytes.numel()));
  BOOST_TEST(text == "AABBB");  // sorted by name, each file once
}

BOOST_AUTO_TEST_CASE(text_windows_and_shifted_targets) {
  std::string text;
  for (int i = 0; i < 23; ++i) text.push_back(static_cast<char>('a' + i));
  at::Tensor bytes = at::empty({23}, at::kByte);
  std::memcpy(bytes.data_ptr<uint8_t>(), text.data(), 23);
  mpiaccel::TextDataset data(bytes, 5);
  BOOST_TEST(data.size() == 4);  // windows at 0, 5, 10, 15 (+1 byte each): 20 needs byte 20
  Batch batch = data.get({3, 0});
  BOOST_TEST(batch.input.sizes() == at::IntArrayRef({2, 5}));
  BOOST_TEST(batch.input.scalar_type() == at::kLong);
  BOOST_TEST(batch.input[0][0].item<int64_t>() == 'a' + 15);
  BOOST_TEST(batch.target[0][4].item<int64_t>() == 'a' + 20);
  BOOST_TEST(batch.input[1][0].item<int64_t>() == 'a');
  BOOST_TEST(batch.input.slice(1, 1).equal(batch.target.slice(1, 0, 4)));
  BOOST_CHECK_THROW(data.get({4}), Error);
  BOOST_CHECK_THROW(mpiaccel::TextDataset(bytes, 23), Error);
}

BOOST_AUTO_TEST_CASE(real_fortunes_load_and_split) {
  at::Tensor all = mpiaccel::read_text_corpus(mpiaccel::kFortunesDir);
  // Debian 12's fortunes: about 2.6 MB of text once the .u8 links are not
  // counted twice (they would double it).
  BOOST_TEST(all.numel() > 2000000);
  BOOST_TEST(all.numel() < 3500000);
  const int64_t newlines = all.eq(uint8_t{'\n'}).sum().item<int64_t>();
  BOOST_TEST(newlines > 50000);

  auto train = mpiaccel::make_dataset("fortunes", "", "train", 64, 0.1);
  auto val = mpiaccel::make_dataset("fortunes", "", "val", 64, 0.1);
  const int64_t val_bytes = std::llround(all.numel() * 0.1);
  BOOST_TEST(train->size() == (all.numel() - val_bytes - 1) / 64);
  BOOST_TEST(val->size() == (val_bytes - 1) / 64);

  Batch batch = train->get({0, train->size() - 1});
  BOOST_TEST(batch.input.sizes() == at::IntArrayRef({2, 64}));
  BOOST_TEST(batch.input.min().item<int64_t>() >= 0);
  BOOST_TEST(batch.input.max().item<int64_t>() < 256);
  BOOST_TEST(batch.input.slice(1, 1).equal(batch.target.slice(1, 0, 63)));
  // The validation split is the corpus's tail.
  Batch last = val->get({val->size() - 1});
  const int64_t end = all.numel() - val_bytes + val->size() * 64 + 1;
  BOOST_TEST(last.target.flatten().equal(all.slice(0, end - 64, end).to(at::kLong)));
}

BOOST_AUTO_TEST_CASE(missing_text_directory_names_the_package) {
  const std::string missing = message_of(
      [] { mpiaccel::make_dataset("fortunes", "/nonexistent/fortunes", "train", 64, 0.1); });
  BOOST_TEST(contains(missing, "dataset directory /nonexistent/fortunes not found"), missing);
  BOOST_TEST(contains(missing, "apt-get install fortunes"), missing);
  BOOST_TEST(contains(missing, "data_dir"), missing);

  TempDir empty;
  const std::string none = message_of([&] { mpiaccel::read_text_corpus(empty.path.string()); });
  BOOST_TEST(contains(none, "holds no text files"), none);

  TempDir tiny;
  tiny.write("t", "short");
  const std::string small =
      message_of([&] { mpiaccel::make_dataset("fortunes", tiny.path.string(), "val", 64, 0.1); });
  BOOST_TEST(contains(small, "fewer than one sample"), small);
  BOOST_CHECK_THROW(mpiaccel::make_dataset("imagenet", "", "train", 64, 0.1), Error);
  BOOST_CHECK_THROW(mpiaccel::make_dataset("fortunes", "", "test", 64, 0.1), Error);
}

BOOST_AUTO_TEST_CASE(real_fashion_mnist_loads) {
  auto train = mpiaccel::make_dataset("fashion-mnist", "", "train", 0, 0.0);
  auto test = mpiaccel::make_dataset("fashion-mnist", "", "val", 0, 0.0);
  BOOST_TEST(train->size() == 60000);
  BOOST_TEST(test->size() == 10000);

  auto* fashion = dynamic_cast<const mpiaccel::FashionMnistDataset*>(train.get());
  BOOST_REQUIRE(fashion != nullptr);
  // Balanced classes: 6000 of each label 0..9.
  at::Tensor counts = at::bincount(fashion->labels());
  BOOST_TEST(counts.numel() == 10);
  BOOST_TEST(counts.min().item<int64_t>() == 6000);
  BOOST_TEST(counts.max().item<int64_t>() == 6000);
  // The normalisation constants are the training set's pixel mean and std.
  at::Tensor pixels = fashion->images().to(at::kFloat).div(255.0);
  BOOST_TEST(pixels.mean().item<double>() == 0.2860, boost::test_tools::tolerance(0.001));
  BOOST_TEST(pixels.std().item<double>() == 0.3530, boost::test_tools::tolerance(0.001));

  Batch batch = train->get({0, 1, 59999});
  BOOST_TEST(batch.input.sizes() == at::IntArrayRef({3, 1, 28, 28}));
  BOOST_TEST(batch.input.scalar_type() == at::kFloat);
  BOOST_TEST(batch.target.scalar_type() == at::kLong);
  BOOST_TEST(batch.target.sizes() == at::IntArrayRef({3}));
  const double low = (0.0 - 0.2860) / 0.3530;
  const double high = (1.0 - 0.2860) / 0.3530;
  BOOST_TEST(batch.input.min().item<double>() >= low - 1e-5);
  BOOST_TEST(batch.input.max().item<double>() <= high + 1e-5);
  // The first training image is an ankle boot (label 9), the second a T-shirt (0).
  BOOST_TEST(batch.target[0].item<int64_t>() == 9);
  BOOST_TEST(batch.target[1].item<int64_t>() == 0);
}

BOOST_AUTO_TEST_CASE(missing_fashion_mnist_names_the_package) {
  const std::string missing = message_of([] {
    mpiaccel::FashionMnistDataset(mpiaccel::kFashionMnistDir + std::string("-no"), "train");
  });
  BOOST_TEST(contains(missing, "not found"), missing);
  BOOST_TEST(contains(missing, "dataset-fashion-mnist"), missing);

  TempDir dir;
  const std::string files =
      message_of([&] { mpiaccel::FashionMnistDataset(dir.path.string(), "test"); });
  BOOST_TEST(contains(files, "t10k-images-idx3-ubyte.gz not found"), files);

  // A file that is not IDX: the magic number check says so.
  fs::copy_file(fs::path(mpiaccel::kFashionMnistDir) / "t10k-labels-idx1-ubyte.gz",
                dir.path / "t10k-images-idx3-ubyte.gz");
  fs::copy_file(fs::path(mpiaccel::kFashionMnistDir) / "t10k-labels-idx1-ubyte.gz",
                dir.path / "t10k-labels-idx1-ubyte.gz");
  const std::string magic =
      message_of([&] { mpiaccel::FashionMnistDataset(dir.path.string(), "test"); });
  BOOST_TEST(contains(magic, "magic number 2049, expected 2051"), magic);
}

namespace {

// Writes `bytes` gzipped as DIR/NAME (gzip -n: no name or time in the header).
void write_gzipped(const fs::path& dir, const std::string& name, const std::string& bytes) {
  const fs::path raw = dir / (name + ".raw");
  std::ofstream(raw, std::ios::binary) << bytes;
  const std::string command = "gzip -n -c '" + raw.string() + "' > '" + (dir / name).string() + "'";
  BOOST_REQUIRE(std::system(command.c_str()) == 0);
  fs::remove(raw);
}

std::string idx_header(uint32_t magic, std::vector<uint32_t> dims) {
  std::string h;
  dims.insert(dims.begin(), magic);
  for (uint32_t v : dims)
    for (int shift : {24, 16, 8, 0}) h.push_back(static_cast<char>((v >> shift) & 0xFF));
  return h;
}

}  // namespace

BOOST_AUTO_TEST_CASE(fashion_mnist_headers_that_lie_are_refused) {
  TempDir dir;
  const auto load = [&] { mpiaccel::FashionMnistDataset(dir.path.string(), "test"); };
  fs::copy_file(fs::path(mpiaccel::kFashionMnistDir) / "t10k-labels-idx1-ubyte.gz",
                dir.path / "t10k-labels-idx1-ubyte.gz");
  // Counts whose product overflows 64 bits.
  write_gzipped(dir.path, "t10k-images-idx3-ubyte.gz",
                idx_header(2051, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}) + std::string(784, '\0'));
  std::string message = message_of(load);
  BOOST_TEST(contains(message, "IDX header claims more elements than any file holds"), message);
  // More images than the file holds.
  write_gzipped(dir.path, "t10k-images-idx3-ubyte.gz", idx_header(2051, {1000000, 28, 28}) + std::string(784, '\0'));
  message = message_of(load);
  BOOST_TEST(contains(message, "holds 784 data bytes but its header says 784000000"), message);
  // A gzip bomb: 300 MiB of zeros in a few hundred KiB.
  write_gzipped(dir.path, "t10k-images-idx3-ubyte.gz", idx_header(2051, {1, 28, 28}) + std::string(size_t{300} << 20, '\0'));
  BOOST_TEST(fs::file_size(dir.path / "t10k-images-idx3-ubyte.gz") < (size_t{1} << 20));
  message = message_of(load);
  BOOST_TEST(contains(message, "decompresses to more than 256 MiB"), message);
}
