// ctest: links mpiaccel; timeout 120
// mpiaccel::Tokenizer on a small BPE model trained here: lossless round trip
// on any bytes, vocabulary, and its errors.
#define BOOST_TEST_MODULE tokenizer
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

namespace fs = std::filesystem;

#include "support/scratch_dir.hpp"

using mpiaccel::test::contains;
using mpiaccel::test::message_of;

namespace {

// A model trained once for the whole suite (a second or two).
struct Model {
  Model() {
    path = (dir.path / "tokenizer.model").string();
    std::string text;
    for (int i = 0; i < 400; ++i) {
      text += "The quick brown fox " + std::to_string(i) + " jumps over the lazy dog.\n";
      text += "\tA stitch in time saves nine; so they say, again and again.\n%\n";
    }
    mpiaccel::BpeTrainOptions options;
    options.vocab_size = 400;
    mpiaccel::train_bpe_tokenizer(text, path, options);
  }
  mpiaccel::test::TempDir dir{"tokenizer"};
  std::string path;
};

const Model& model() {
  static const Model m;
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_is_lossless_on_any_utf8_text) {
  const mpiaccel::Tokenizer tokenizer(model().path);
  BOOST_TEST(tokenizer.loaded());
  BOOST_TEST(tokenizer.vocab_size() == 400);
  const std::vector<std::string> texts = {
      "The quick brown fox jumps over the lazy dog.\n",
      "  leading spaces,\ttabs\n\n\nand blank lines  \n",
      "unseen: Zürich, 東京, emoji \xF0\x9F\x98\x80, rare bytes \x01\x7f",
      "",
      "no newline at the end"};
  for (const std::string& text : texts) {
    const std::vector<int64_t> ids = tokenizer.encode(text);
    for (const int64_t id : ids) BOOST_TEST((id >= 0 && id < 400));
    BOOST_TEST(tokenizer.decode(ids) == text);
  }
  // Merges learned: the training text needs fewer ids than bytes.
  const std::string seen = "The quick brown fox jumps over the lazy dog.\n";
  BOOST_TEST(tokenizer.encode(seen).size() < seen.size() / 2);
  // Texts ending in a newline encode piecewise to the ids of their concatenation.
  std::vector<int64_t> parts = tokenizer.encode(texts[0]);
  const std::vector<int64_t> second = tokenizer.encode(texts[1]);
  parts.insert(parts.end(), second.begin(), second.end());
  BOOST_TEST(parts == tokenizer.encode(texts[0] + texts[1]));
}

BOOST_AUTO_TEST_CASE(moved_and_reloaded) {
  mpiaccel::Tokenizer a;
  BOOST_TEST(!a.loaded());
  BOOST_CHECK_THROW(a.encode("x"), mpiaccel::Error);
  a.load(model().path);
  mpiaccel::Tokenizer b = std::move(a);
  BOOST_TEST(b.decode(b.encode("again and again")) == "again and again");
  BOOST_CHECK_THROW(b.decode({400}), mpiaccel::Error);
}

BOOST_AUTO_TEST_CASE(errors_name_the_file) {
  const std::string m = message_of([] { mpiaccel::Tokenizer t("/nonexistent/tokenizer.model"); });
  BOOST_TEST(m.find("cannot load tokenizer model /nonexistent/tokenizer.model") != std::string::npos);
  BOOST_CHECK_THROW(mpiaccel::train_bpe_tokenizer("", (model().dir.path / "x.model").string()),
                    mpiaccel::Error);
  mpiaccel::BpeTrainOptions tiny;
  tiny.vocab_size = 100;
  BOOST_CHECK_THROW(mpiaccel::train_bpe_tokenizer("abc\n", (model().dir.path / "x.model").string(), tiny),
                    mpiaccel::Error);
}
