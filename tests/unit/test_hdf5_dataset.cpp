// ctest: links mpiaccel; timeout 120
// [train] dataset = hdf5 on files that h5py wrote (tests/python/write_hdf5_arrays.py):
// row samples with type conversion, labels, splits, hyperslab-only reads of a
// 40 GB logical dataset, and the errors.
#define BOOST_TEST_MODULE hdf5_dataset
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

namespace fs = std::filesystem;
using mpiaccel::Error;
using mpiaccel::Hdf5Dataset;

#include "support/scratch_dir.hpp"
#include "test_paths.hpp"

using mpiaccel::test::contains;
using mpiaccel::test::message_of;

namespace {

// The fixture file, written once by h5py; a missing h5py fails the suite.
struct Fixture {
  Fixture() {
    path = (dir.path / "fixture.h5").string();
    const std::string command = "/usr/bin/python3 " MPIACCEL_SOURCE_DIR
                                "/tests/python/write_hdf5_arrays.py fixture " + path;
    BOOST_TEST_REQUIRE(std::system(command.c_str()) == 0, "h5py could not write " << path);
  }
  mpiaccel::test::TempDir dir{"hdf5_dataset"};
  std::string path;
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

std::vector<float> floats(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<int64_t> longs(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

BOOST_AUTO_TEST_CASE(rows_in_request_order_converted_to_float32_and_int64) {
  const Hdf5Dataset data(fixture().path, "/inputs", "/labels");
  BOOST_TEST(data.size() == 10);
  BOOST_TEST(data.sample_shape() == (std::vector<int64_t>{2, 3}));
  BOOST_TEST(data.has_labels());
  const mpiaccel::Batch batch = data.get({7, 2, 3, 7});  // unsorted, a run, a repeat
  BOOST_TEST(batch.input.sizes().vec() == (std::vector<int64_t>{4, 2, 3}));
  BOOST_TEST((batch.input.scalar_type() == at::kFloat));
  BOOST_TEST((batch.target.scalar_type() == at::kLong));
  BOOST_TEST(floats(batch.input[0]) == (std::vector<float>{700, 701, 702, 703, 704, 705}));
  BOOST_TEST(floats(batch.input[1]) == (std::vector<float>{200, 201, 202, 203, 204, 205}));
  BOOST_TEST(floats(batch.input[2]) == (std::vector<float>{300, 301, 302, 303, 304, 305}));
  BOOST_TEST(floats(batch.input[3]) == floats(batch.input[0]));
  BOOST_TEST(longs(batch.target) == (std::vector<int64_t>{21, 6, 9, 21}));
  BOOST_TEST(data.rows_read() == 3);  // distinct rows only

  // uint8 in the file, float32 out; no labels: the target is the input.
  const Hdf5Dataset pixels(fixture().path, "/group/pixels", "");
  BOOST_TEST(!pixels.has_labels());
  const mpiaccel::Batch p = pixels.get({1});
  BOOST_TEST(floats(p.input) == (std::vector<float>{4, 5, 6, 7}));
  BOOST_TEST(floats(p.target) == floats(p.input));
}

// Contiguous little-endian arrays are read with pread; chunked, big-endian
// and uint16 ones by H5Dread. Both give the same values.
BOOST_AUTO_TEST_CASE(direct_reads_equal_hdf5_reads) {
  const Hdf5Dataset direct(fixture().path, "/inputs", "/labels");
  BOOST_TEST(direct.reads_directly());
  const std::vector<int64_t> rows{9, 0, 4, 5, 6, 4};
  const mpiaccel::Batch want = direct.get(rows);
  for (const auto& [inputs, labels] :
       std::vector<std::pair<std::string, std::string>>{{"/inputs_chunked", "/labels_chunked"},
                                                        {"/inputs_big_endian", "/labels_uint16"},
                                                        {"/inputs", "/labels_uint16"}}) {
    const Hdf5Dataset other(fixture().path, inputs, labels);
    BOOST_TEST(!other.reads_directly(), inputs << " " << labels);
    const mpiaccel::Batch got = other.get(rows);
    BOOST_TEST(floats(got.input) == floats(want.input), inputs);
    BOOST_TEST(longs(got.target) == longs(want.target), labels);
  }
  BOOST_TEST(Hdf5Dataset(fixture().path, "/group/pixels", "").reads_directly());  // uint8
  BOOST_TEST(!Hdf5Dataset(fixture().path, "/huge", "").reads_directly());        // chunked
}

// Loader workers call get() from several threads at once, on both paths.
BOOST_AUTO_TEST_CASE(threads_read_at_once_on_both_paths) {
  const Hdf5Dataset direct(fixture().path, "/inputs", "/labels");
  const Hdf5Dataset locked(fixture().path, "/inputs_chunked", "/labels_chunked");
  const mpiaccel::Batch want = direct.get({3, 8, 1});
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Hdf5Dataset& data = t % 2 ? locked : direct;
      for (int i = 0; i < 200; ++i) {
        const mpiaccel::Batch got = data.get({3, 8, 1});
        if (floats(got.input) != floats(want.input) || longs(got.target) != longs(want.target)) ++wrong[t];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  BOOST_TEST(wrong == std::vector<int>(4, 0), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_split_sees_only_its_rows) {
  const Hdf5Dataset tail(fixture().path, "/inputs", "/labels", 8, 2);
  BOOST_TEST(tail.size() == 2);
  BOOST_TEST(tail.file_rows() == 10);
  BOOST_TEST(longs(tail.get({0, 1}).target) == (std::vector<int64_t>{24, 27}));
  BOOST_CHECK_THROW(tail.get({2}), Error);
  BOOST_CHECK_THROW(Hdf5Dataset(fixture().path, "/inputs", "/labels", 8, 3), Error);
}

// 10^7 x 1000 float32 rows: reading it whole would take 40 GB. Each get()
// reads only the selected rows, so this is instant and small.
BOOST_AUTO_TEST_CASE(reads_are_hyperslabs_of_the_requested_rows_only) {
  const Hdf5Dataset huge(fixture().path, "/huge", "");
  BOOST_TEST(huge.size() == 10'000'000);
  const mpiaccel::Batch batch = huge.get({9'999'999, 5, 6});
  BOOST_TEST(batch.input.sizes().vec() == (std::vector<int64_t>{3, 1000}));
  BOOST_TEST(batch.input[0][999].item<float>() == 999.0f);
  BOOST_TEST(batch.input[1].sum().item<float>() == 5000.0f);
  BOOST_TEST(batch.input[2].sum().item<float>() == 0.0f);  // never written: the fill value
  BOOST_TEST(huge.rows_read() == 3);
}

BOOST_AUTO_TEST_CASE(make_dataset_holds_out_the_last_rows_or_uses_val_h5) {
  mpiaccel::TrainConfig train;
  train.dataset = mpiaccel::DatasetChoice::Hdf5;
  train.data_dir = fixture().path;
  train.val_fraction = 0.2;
  const auto head = mpiaccel::make_dataset(train, "train");
  const auto tail = mpiaccel::make_dataset(train, "val");
  BOOST_TEST(head->size() == 8);
  BOOST_TEST(tail->size() == 2);
  BOOST_TEST(longs(tail->get({0}).target) == (std::vector<int64_t>{24}));
  BOOST_TEST(mpiaccel::dataset_vocab_size(train) == 0);

  // A directory: train.h5 and, when present, val.h5 used whole.
  const fs::path dir = fixture().dir.path / "split";
  fs::create_directories(dir);
  fs::copy_file(fixture().path, dir / "train.h5", fs::copy_options::overwrite_existing);
  train.data_dir = dir.string();
  BOOST_TEST(mpiaccel::make_dataset(train, "val")->size() == 2);
  fs::copy_file(fixture().path, dir / "val.h5", fs::copy_options::overwrite_existing);
  BOOST_TEST(mpiaccel::make_dataset(train, "train")->size() == 10);
  BOOST_TEST(mpiaccel::make_dataset(train, "val")->size() == 10);

  train.data_dir = fixture().path;
  train.val_fraction = 0.01;  // 0 of 10 rows held out
  BOOST_TEST(contains(message_of([&] { mpiaccel::make_dataset(train, "val"); }),
                      "each needs at least one: change [train] val_fraction"));
}

BOOST_AUTO_TEST_CASE(errors_name_the_file_the_dataset_and_the_key) {
  const std::string& f = fixture().path;
  std::string m = message_of([&] { Hdf5Dataset d(f + ".missing", "/inputs", ""); });
  BOOST_TEST(contains(m, "cannot open HDF5 file " + f + ".missing"));
  m = message_of([&] { Hdf5Dataset d(f, "/x", ""); });
  BOOST_TEST(contains(m, "has no dataset '/x' for the inputs; set [train] hdf5_inputs"));
  m = message_of([&] { Hdf5Dataset d(f, "/inputs", "/y"); });
  BOOST_TEST(contains(m, "has no dataset '/y' for the labels; set [train] hdf5_labels"));
  m = message_of([&] { Hdf5Dataset d(f, "/names", ""); });
  BOOST_TEST(contains(m, ":/names is not numeric"));
  m = message_of([&] { Hdf5Dataset d(f, "/inputs", "/float_labels"); });
  BOOST_TEST(contains(m, "labels must be integers"));
  m = message_of([&] { Hdf5Dataset d(f, "/inputs", "/short_labels"); });
  BOOST_TEST(contains(m, "have 9 rows but inputs /inputs have 10"));
  m = message_of([&] { Hdf5Dataset d(f, "/scalar", ""); });
  BOOST_TEST(contains(m, "is a scalar"));
  mpiaccel::TrainConfig train;
  train.dataset = mpiaccel::DatasetChoice::Hdf5;
  BOOST_TEST(contains(message_of([&] { mpiaccel::make_dataset(train, "train"); }),
                      "needs [train] data_dir"));
}
