// `mpiaccel data tokenize --input DIR|FILE --output DIR [--vocab-size N |
// --model FILE] [--val-fraction F] [--threads N] [--max-sentences N]`:
// trains a BPE tokenizer on the training part of a text corpus (or takes a
// given SentencePiece model) and writes OUTPUT/train.tokens, val.tokens and
// tokenizer.model, the data of `[train] dataset = tokens`.
//
// The train/validation split is the byte-level dataset's (read_text_corpus +
// text_split with the same val_fraction), so a BPE job and the byte-level job
// are validated on exactly the same text. The tokenizer is trained on the
// training part only.

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::tool {
namespace {

namespace fs = std::filesystem;

struct TokenizeArguments {
  std::string input;
  std::string output;
  std::string model;
  int64_t vocab_size = 2048;
  bool vocab_given = false;
  double val_fraction = 0.05;  // [train] val_fraction's default
  int threads = 2;
  int64_t max_sentences = 200000;
};

int64_t parse_count(const std::string& option, const std::string& value, int64_t low, int64_t high) {
  char* end = nullptr;
  const long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || n < low || n > high)
    throw UsageError(option + " '" + value + "' is not an integer in [" + std::to_string(low) + ", " +
                     std::to_string(high) + "]");
  return n;
}

TokenizeArguments parse_tokenize_arguments(const std::vector<std::string>& args) {
  TokenizeArguments out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a != "--input" && a != "--output" && a != "--model" && a != "--vocab-size" &&
        a != "--val-fraction" && a != "--threads" && a != "--max-sentences")
      throw UsageError("unexpected argument '" + a + "'");
    if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
    const std::string& value = args[++i];
    if (a == "--input") {
      out.input = value;
    } else if (a == "--output") {
      out.output = value;
    } else if (a == "--model") {
      out.model = value;
    } else if (a == "--vocab-size") {
      out.vocab_size = parse_count(a, value, 260, 1 << 20);
      out.vocab_given = true;
    } else if (a == "--threads") {
      out.threads = static_cast<int>(parse_count(a, value, 1, 1024));
    } else if (a == "--max-sentences") {
      out.max_sentences = parse_count(a, value, 1, int64_t{1} << 40);
    } else {
      char* end = nullptr;
      out.val_fraction = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(out.val_fraction > 0.0 && out.val_fraction < 1.0))
        throw UsageError("--val-fraction '" + value + "' is not a number in (0, 1)");
    }
  }
  if (out.input.empty()) throw UsageError("--input DIR|FILE is required (the text to tokenize)");
  if (out.output.empty()) throw UsageError("--output DIR is required");
  if (!out.model.empty() && out.vocab_given)
    throw UsageError("--vocab-size and --model exclude each other (a model has its vocabulary)");
  return out;
}

// A directory is a corpus (every text file, as the byte-level dataset reads
// it); a file is read as it is.
at::Tensor read_input(const std::string& input) {
  std::error_code ec;
  if (fs::is_directory(input, ec)) return read_text_corpus(input);
  std::ifstream in(input, std::ios::binary);
  MPIACCEL_CHECK(in.good(), "cannot open --input " + input + ": not a readable file or directory");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  MPIACCEL_CHECK(!bytes.empty(), "--input " + input + " is empty");
  at::Tensor out = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(out.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return out;
}

std::string as_text(const at::Tensor& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()),
                     static_cast<size_t>(bytes.numel()));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run_tokenize(const std::vector<std::string>& args) {
  const TokenizeArguments parsed = parse_tokenize_arguments(args);
  const auto start = std::chrono::steady_clock::now();
  const at::Tensor corpus = read_input(parsed.input);
  const std::string train_text = as_text(text_split(corpus, "train", parsed.val_fraction));
  const std::string val_text = as_text(text_split(corpus, "val", parsed.val_fraction));
  MPIACCEL_CHECK(!val_text.empty(), "--val-fraction " + std::to_string(parsed.val_fraction) +
                                        " of " + parsed.input + " leaves no validation text");

  std::error_code ec;
  fs::create_directories(parsed.output, ec);
  MPIACCEL_CHECK(fs::is_directory(parsed.output, ec),
                 "cannot create --output " + parsed.output + ": " + ec.message());
  const std::string model_path = (fs::path(parsed.output) / "tokenizer.model").string();
  if (parsed.model.empty()) {
    BpeTrainOptions options;
    options.vocab_size = parsed.vocab_size;
    options.num_threads = parsed.threads;
    options.max_sentences = parsed.max_sentences;
    train_bpe_tokenizer(train_text, model_path, options);
    std::printf("tokenizer: BPE with %lld pieces trained on %zu bytes in %.1f s -> %s\n",
                static_cast<long long>(parsed.vocab_size), train_text.size(), seconds_since(start),
                model_path.c_str());
  } else {
    const Tokenizer check(parsed.model);  // a clear error before anything is copied
    if (!fs::equivalent(parsed.model, model_path, ec)) {
      fs::copy_file(parsed.model, model_path, fs::copy_options::overwrite_existing, ec);
      MPIACCEL_CHECK(!ec, "cannot copy " + parsed.model + " to " + model_path + ": " + ec.message());
    }
    std::printf("tokenizer: %s (%lld pieces)\n", parsed.model.c_str(),
                static_cast<long long>(check.vocab_size()));
  }

  const Tokenizer tokenizer(model_path);
  const int64_t vocab = tokenizer.vocab_size();
  for (const auto& [split, text] : {std::pair{"train", &train_text}, std::pair{"val", &val_text}}) {
    const std::vector<int64_t> ids = tokenizer.encode(*text);
    const std::string path = (fs::path(parsed.output) / (std::string(split) + ".tokens")).string();
    write_token_file(path, ids, vocab);
    std::printf("%s: %zu tokens from %zu bytes (%.3f bytes/token)\n", path.c_str(), ids.size(),
                text->size(), static_cast<double>(text->size()) / static_cast<double>(ids.size()));
  }
  std::printf("done in %.1f s; train with [train] dataset = tokens, data_dir = %s (the GPT's "
              "vocabulary follows the files': %lld)\n",
              seconds_since(start), parsed.output.c_str(), static_cast<long long>(vocab));
  return 0;
}

int run_data(const std::vector<std::string>& args, int*, char***) {
  if (args.empty()) throw UsageError("which subcommand? accepted: tokenize");
  if (args[0] == "tokenize") return run_tokenize({args.begin() + 1, args.end()});
  throw UsageError("unknown subcommand '" + args[0] + "'; accepted: tokenize");
}

}  // namespace

extern const Command kDataCommand = {
    "data", "prepare training data: BPE-tokenize text into token files",
    "usage: mpiaccel data tokenize --input DIR|FILE --output DIR [--vocab-size N | --model FILE]\n"
    "                              [--val-fraction F] [--threads N] [--max-sentences N]\n"
    "\n"
    "Splits the text of DIR (every text file, sorted by name, as [train] dataset = fortunes\n"
    "reads it) or FILE into training and validation parts like the byte-level dataset\n"
    "(the last F of the bytes held out), trains a byte-fallback BPE tokenizer\n"
    "(SentencePiece) on the training part, and writes into the output directory:\n"
    "  tokenizer.model   the SentencePiece model (mpiaccel::Tokenizer loads it)\n"
    "  train.tokens      the training part's token ids\n"
    "  val.tokens        the validation part's token ids\n"
    "Train on them with [train] dataset = tokens, data_dir = DIR and [model] vocab_size\n"
    "at least the tokenizer's (printed at the end). docs/data_and_models.md describes the\n"
    "token file format.\n"
    "\n"
    "  --input DIR|FILE     the text\n"
    "  --output DIR         where the files go (created if missing)\n"
    "  --vocab-size N       pieces of the trained tokenizer, 260 or more (default 2048)\n"
    "  --model FILE         use this SentencePiece model instead of training one\n"
    "  --val-fraction F     share of the bytes held out for validation (default 0.05)\n"
    "  --threads N          SentencePiece training threads (default 2)\n"
    "  --max-sentences N    lines sampled for training, to bound its time (default 200000)\n",
    run_data};

}  // namespace mpiaccel::tool
