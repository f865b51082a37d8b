// ctest: links mpiaccel; timeout 120
// Token files (format, every header error, windows) and the token dataset
// through make_dataset, the sampler and the loader (resume at another world size).
#define BOOST_TEST_MODULE token_data
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

namespace fs = std::filesystem;
using mpiaccel::Error;
using mpiaccel::TokenDtype;
using mpiaccel::TokenFile;

#include "support/scratch_dir.hpp"

using mpiaccel::test::contains;
using mpiaccel::test::message_of;
using mpiaccel::test::TempDir;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void put_u32(std::string& bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<char>(v >> (8 * i));
}

std::vector<int64_t> iota(int64_t n, int64_t vocab) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back((i * 7919) % vocab);
  return out;
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_uint16_and_uint32) {
  TempDir dir;
  for (const auto& [vocab, dtype] : {std::pair<int64_t, TokenDtype>{65536, TokenDtype::kUint16},
                                     std::pair<int64_t, TokenDtype>{65537, TokenDtype::kUint32},
                                     std::pair<int64_t, TokenDtype>{300, TokenDtype::kUint32}}) {
    const std::vector<int64_t> tokens = iota(1001, vocab);
    const std::string path = dir.file("t.tokens");
    if (vocab == 300) {
      mpiaccel::write_token_file(path, tokens, vocab, dtype);  // explicit wider dtype
    } else {
      BOOST_TEST((mpiaccel::token_dtype_for(vocab) == dtype));
      mpiaccel::write_token_file(path, tokens, vocab);
    }
    BOOST_TEST(!fs::exists(path + ".tmp"));
    BOOST_TEST(fs::file_size(path) == 32 + 1001 * static_cast<size_t>(dtype));
    const std::string bytes = read_bytes(path);
    BOOST_TEST(bytes.substr(0, 8) == "MPIATOKS");
    BOOST_TEST(bytes[8] == 1);  // version, little-endian
    BOOST_TEST(bytes[12] == static_cast<char>(dtype));

    const TokenFile file(path);
    BOOST_TEST((file.dtype() == dtype));
    BOOST_TEST(file.size() == 1001);
    BOOST_TEST(file.vocab_size() == vocab);
    BOOST_TEST(to_vector(file.slice(0, 1001)) == tokens);
    BOOST_TEST(to_vector(file.slice(990, 11)) ==
               std::vector<int64_t>(tokens.begin() + 990, tokens.end()));
  }
}

BOOST_AUTO_TEST_CASE(writer_refuses_ids_outside_the_vocabulary) {
  TempDir dir;
  BOOST_TEST(contains(message_of([&] { mpiaccel::write_token_file(dir.file("a"), {1, 5, 9}, 9); }),
                      "token 2 is 9, not in [0, 9)"));
  BOOST_CHECK_THROW(mpiaccel::write_token_file(dir.file("a"), {1}, 70000, TokenDtype::kUint16), Error);
  BOOST_TEST(!fs::exists(dir.file("a")));
}

BOOST_AUTO_TEST_CASE(every_corrupt_header_names_the_file_and_the_fix) {
  TempDir dir;
  const std::string good = dir.file("good.tokens");
  mpiaccel::write_token_file(good, iota(100, 1000), 1000);  // uint16: 232 bytes
  const std::string good_bytes = read_bytes(good);
  const std::string bad = dir.file("bad.tokens");
  const auto error_of = [&](const std::string& bytes) {
    write_bytes(bad, bytes);
    return message_of([&] { TokenFile file(bad); });
  };
  const std::string fix = "mpiaccel data tokenize";

  std::string m = message_of([&] { TokenFile file(dir.file("missing.tokens")); });
  BOOST_TEST(contains(m, "missing.tokens"));
  BOOST_TEST(contains(m, "No such file"));

  m = error_of(good_bytes.substr(0, 20));
  BOOST_TEST(contains(m, bad));
  BOOST_TEST(contains(m, "truncated: 20 bytes, shorter than its 32-byte header"));
  BOOST_TEST(contains(m, fix));

  std::string bytes = good_bytes;
  bytes.replace(0, 8, "GPT2BIN!");
  m = error_of(bytes);
  BOOST_TEST(contains(m, "magic 'GPT2BIN!', not 'MPIATOKS'"));
  BOOST_TEST(contains(m, bad));
  BOOST_TEST(contains(m, fix));

  bytes = good_bytes;
  put_u32(bytes, 8, 7);
  m = error_of(bytes);
  BOOST_TEST(contains(m, "format version 7; this mpiaccel reads version 1"));
  BOOST_TEST(contains(m, bad));

  bytes = good_bytes;
  put_u32(bytes, 12, 3);
  BOOST_TEST(contains(error_of(bytes), "dtype code 3; accepted: 2 (uint16), 4 (uint32)"));

  bytes = good_bytes;
  put_u32(bytes, 24, 70000);  // vocabulary too large for uint16 ids
  BOOST_TEST(contains(error_of(bytes), "vocabulary size 70000, which uint16 ids cannot hold"));
  put_u32(bytes, 24, 0);
  BOOST_TEST(contains(error_of(bytes), "vocabulary size 0"));

  m = error_of(good_bytes.substr(0, good_bytes.size() - 3));  // a file cut short
  BOOST_TEST(contains(m, "truncated: its header says 100 uint16 tokens (232 bytes) but it has 229 bytes"));
  BOOST_TEST(contains(m, bad));

  bytes = good_bytes;
  put_u32(bytes, 16, 99);  // a count that does not match the file size
  m = error_of(bytes);
  BOOST_TEST(contains(m, "count does not match the file size"));
  BOOST_TEST(contains(m, "more than its header's 99 uint16 tokens"));

  bytes = good_bytes;
  bytes[32 + 2 * 5] = static_cast<char>(0xff);  // token 5 = 0x..ff >= vocabulary 1000
  bytes[32 + 2 * 5 + 1] = static_cast<char>(0xff);
  write_bytes(bad, bytes);
  const TokenFile file(bad);  // ids are not scanned on open
  m = message_of([&] { file.slice(0, 10); });
  BOOST_TEST(contains(m, "token 5 is 65535, not below the header's vocabulary 1000"));
  BOOST_TEST(to_vector(file.slice(0, 5)) == std::vector<int64_t>(iota(5, 1000)));
  BOOST_CHECK_THROW(file.slice(95, 6), Error);
}

BOOST_AUTO_TEST_CASE(windows_and_shifted_targets) {
  TempDir dir;
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 23; ++i) tokens.push_back(100 + i);
  mpiaccel::write_token_file(dir.file("t.tokens"), tokens, 200);
  const mpiaccel::TokenDataset data(dir.file("t.tokens"), 5);
  BOOST_TEST(data.size() == 4);  // (23 - 1) / 5
  BOOST_TEST(data.vocab_size() == 200);
  const mpiaccel::Batch batch = data.get({3, 0, 3});
  BOOST_TEST(batch.input.sizes().vec() == (std::vector<int64_t>{3, 5}));
  BOOST_TEST((batch.input.scalar_type() == at::kLong && batch.target.scalar_type() == at::kLong));
  BOOST_TEST(to_vector(batch.input[0]) == (std::vector<int64_t>{115, 116, 117, 118, 119}));
  BOOST_TEST(to_vector(batch.target[0]) == (std::vector<int64_t>{116, 117, 118, 119, 120}));
  BOOST_TEST(to_vector(batch.input[1]) == (std::vector<int64_t>{100, 101, 102, 103, 104}));
  BOOST_TEST(to_vector(batch.target[1]) == (std::vector<int64_t>{101, 102, 103, 104, 105}));
  BOOST_TEST(to_vector(batch.input[2]) == to_vector(batch.input[0]));
  BOOST_CHECK_THROW(data.get({4}), Error);
  BOOST_TEST(contains(message_of([&] { mpiaccel::TokenDataset(dir.file("t.tokens"), 23); }),
                      "23 tokens, fewer than one sample of seq_len + 1 = 24"));
}

BOOST_AUTO_TEST_CASE(make_dataset_reads_the_split_files_and_reports_the_vocabulary) {
  TempDir dir;
  mpiaccel::write_token_file(dir.file("train.tokens"), iota(1000, 3000), 3000);
  mpiaccel::write_token_file(dir.file("val.tokens"), iota(100, 3000), 3000);
  mpiaccel::TrainConfig train;
  train.dataset = mpiaccel::DatasetChoice::Tokens;
  train.data_dir = dir.path.string();
  train.seq_len = 9;
  BOOST_TEST(mpiaccel::make_dataset(train, "train")->size() == 111);
  BOOST_TEST(mpiaccel::make_dataset(train, "val")->size() == 11);
  // The five-argument form (what the trainer calls today) gives the same.
  BOOST_TEST(mpiaccel::make_dataset("tokens", dir.path.string(), "val", 9, 0.05)->size() == 11);
  BOOST_TEST(mpiaccel::dataset_vocab_size(train) == 3000);
  mpiaccel::check_model_vocab_size(train, 3000);
  const std::string m = message_of([&] { mpiaccel::check_model_vocab_size(train, 256); });
  BOOST_TEST(contains(m, "[model] vocab_size 256 is smaller than the vocabulary 3000 of"));
  BOOST_TEST(contains(m, "train.tokens; set model.vocab_size = 3000"));

  train.data_dir = "";
  BOOST_TEST(contains(message_of([&] { mpiaccel::make_dataset(train, "train"); }),
                      "needs [train] data_dir"));
  train.data_dir = dir.file("nowhere");
  BOOST_TEST(contains(message_of([&] { mpiaccel::make_dataset(train, "train"); }),
                      "nowhere/train.tokens"));

  mpiaccel::TrainConfig bytes;
  BOOST_TEST(mpiaccel::dataset_vocab_size(bytes) == 256);
  BOOST_CHECK_THROW(mpiaccel::check_model_vocab_size(bytes, 100), Error);
  bytes.dataset = mpiaccel::DatasetChoice::FashionMnist;
  BOOST_TEST(mpiaccel::dataset_vocab_size(bytes) == 0);
}

// The same global steps whatever the world size: 2 ranks x 4, checkpoint,
// then 4 ranks x 2 and 1 rank x 8 continue with exactly the windows the
// uninterrupted 2-rank run reads (as sets per global step).
BOOST_AUTO_TEST_CASE(loader_resumes_at_another_world_size_over_token_windows) {
  TempDir dir;
  mpiaccel::write_token_file(dir.file("train.tokens"), iota(4001, 50000), 50000);
  auto data = std::make_shared<mpiaccel::TokenDataset>(dir.file("train.tokens"), 8);  // 500 windows
  const int64_t global = 8;
  const auto step_windows = [&](std::vector<mpiaccel::DistributedLoader>& ranks) {
    std::multiset<std::vector<int64_t>> out;
    for (auto& loader : ranks) {
      const at::Tensor input = loader.next().input;
      for (int64_t b = 0; b < input.size(0); ++b) out.insert(to_vector(input[b]));
    }
    return out;
  };
  const auto make = [&](int world) {
    std::vector<mpiaccel::DistributedLoader> out;
    for (int r = 0; r < world; ++r)
      out.emplace_back(data, mpiaccel::DistributedSampler(data->size(), r, world, 42), global / world);
    return out;
  };
  const int64_t steps = 70;  // crosses the epoch boundary (62 steps of 8 per epoch)
  std::vector<std::multiset<std::vector<int64_t>>> expected;
  auto straight = make(2);
  for (int64_t s = 0; s < steps; ++s) expected.push_back(step_windows(straight));

  for (const int world : {4, 1, 8}) {
    auto first = make(2);
    for (int64_t s = 0; s < 20; ++s) step_windows(first);
    const mpiaccel::LoaderState saved = first[0].state();
    BOOST_TEST((first[1].state() == saved));
    auto resumed = make(world);
    for (auto& loader : resumed) loader.restore(saved);
    for (int64_t s = 20; s < steps; ++s) {
      BOOST_TEST((step_windows(resumed) == expected[static_cast<size_t>(s)]),
                 "world " << world << " step " << s);
    }
  }
}
