// A text corpus into the token files of `[train] dataset = tokens`: what
// `mpiaccel data tokenize` runs, and what the trainer runs on rank 0 for
// [train] tokenize_from.
//
// The train/validation split is the byte-level dataset's (read_text_corpus +
// text_split with the same val_fraction), so a BPE job and the byte-level job
// are validated on exactly the same text. The tokenizer is trained on the
// training part only.

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mpiaccel/datasets.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/token_data.hpp"
#include "mpiaccel/tokenizer.hpp"

namespace mpiaccel {
namespace {

namespace fs = std::filesystem;

// A directory is a corpus (every text file, as the byte-level dataset reads
// it); a file is read as it is.
at::Tensor read_input(const std::string& input) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) return read_text_corpus(input);
  std::ifstream in(input, std::ios::binary);
  MPIACCEL_CHECK(in.good(), "cannot open the text to tokenize, " + input +
                                ": not a readable file or directory");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MPIACCEL_CHECK(!bytes.empty(), "the text to tokenize, " + input + ", is empty");
  at::Tensor out = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(out.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return out;
}

std::string as_text(const at::Tensor& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                     static_cast<size_t>(bytes.numel()));
}

// OUTPUT/tokenizer.model: trained on `train_text`, or a copy of the given model.
void place_model(const TokenizeCorpusOptions& options, const std::string& train_text,
                 const std::string& model_path) {
  if (options.model.empty()) {
    train_bpe_tokenizer(train_text, model_path, options.bpe);
    return;
  }
  const Tokenizer check(options.model);  // a clear error before anything is copied
  std::error_code ec;
  if (fs::equivalent(options.model, model_path, ec)) return;
  fs::copy_file(options.model, model_path, fs::copy_options::overwrite_existing, ec);
  MPIACCEL_CHECK(!ec, "cannot copy " + options.model + " to " + model_path + ": " + ec.message());
}

TokenizedSplit write_split(const Tokenizer& tokenizer, const std::string& dir,
                           const std::string& split, const std::string& text) {
  TokenizedSplit out;
  out.path = (fs::path(dir) / (split + ".tokens")).string();
  const std::vector<int64_t> ids = tokenizer.encode(text);
  write_token_file(out.path, ids, tokenizer.vocab_size());
  out.tokens = static_cast<int64_t>(ids.size());
  out.bytes = static_cast<int64_t>(text.size());
  return out;
}

}  // namespace

TokenizedCorpus tokenize_corpus(const TokenizeCorpusOptions& options) {
  const at::Tensor corpus = read_input(options.input);
  const std::string train_text = as_text(text_split(corpus, "train", options.val_fraction));
  const std::string val_text = as_text(text_split(corpus, "val", options.val_fraction));
  MPIACCEL_CHECK(!val_text.empty(), "a validation fraction of " + std::to_string(options.val_fraction) +
                                        " of " + options.input + " leaves no validation text");

  std::error_code ec;
  fs::create_directories(options.output, ec);
  MPIACCEL_CHECK(fs::is_directory(options.output, ec),
                 "cannot create the token directory " + options.output + ": " + ec.message());
  TokenizedCorpus out;
  out.model_path = (fs::path(options.output) / "tokenizer.model").string();
  place_model(options, train_text, out.model_path);
  const Tokenizer tokenizer(out.model_path);
  out.vocab_size = tokenizer.vocab_size();
  // train.tokens last: its presence says the directory is complete.
  out.val = write_split(tokenizer, options.output, "val", val_text);
  out.train = write_split(tokenizer, options.output, "train", train_text);
  return out;
}

bool token_files_present(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "train.tokens", ec) &&
         fs::is_regular_file(fs::path(dir) / "val.tokens", ec);
}

}  // namespace mpiaccel
