// `mpiaccel data tokenize --input DIR|FILE --output DIR [--vocab-size N |
// --model FILE] [--val-fraction F] [--threads N] [--max-sentences N]`:
// trains a BPE tokenizer on the training part of a text corpus (or takes a
// given SentencePiece model) and writes OUTPUT/train.tokens, val.tokens and
// tokenizer.model, the data of `[train] dataset = tokens` (tokenize_corpus;
// the trainer runs the same for [train] tokenize_from).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tokenizer.hpp"

namespace mpiaccel::tool {
namespace {

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

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void print_split(const TokenizedSplit& split) {
  std::printf("%s: %lld tokens from %lld bytes (%.3f bytes/token)\n", split.path.c_str(),
              static_cast<long long>(split.tokens), static_cast<long long>(split.bytes),
              static_cast<double>(split.bytes) / static_cast<double>(split.tokens));
}

int run_tokenize(const std::vector<std::string>& args) {
  const TokenizeArguments parsed = parse_tokenize_arguments(args);
  const auto start = std::chrono::steady_clock::now();
  TokenizeCorpusOptions options;
  options.input = parsed.input;
  options.output = parsed.output;
  options.model = parsed.model;
  options.bpe.vocab_size = parsed.vocab_size;
  options.bpe.num_threads = parsed.threads;
  options.bpe.max_sentences = parsed.max_sentences;
  options.val_fraction = parsed.val_fraction;
  const TokenizedCorpus made = tokenize_corpus(options);
  if (parsed.model.empty())
    std::printf("tokenizer: BPE with %lld pieces trained on %lld bytes -> %s\n",
                static_cast<long long>(made.vocab_size), static_cast<long long>(made.train.bytes),
                made.model_path.c_str());
  else
    std::printf("tokenizer: %s (%lld pieces)\n", parsed.model.c_str(),
                static_cast<long long>(made.vocab_size));
  print_split(made.train);
  print_split(made.val);
  std::printf("done in %.1f s; train with [train] dataset = tokens, data_dir = %s (the GPT's "
              "vocabulary follows the files': %lld)\n",
              seconds_since(start), parsed.output.c_str(), static_cast<long long>(made.vocab_size));
  return 0;
}

// `mpiaccel data encode --model FILE`: the ids of standard input, one line.
int run_encode(const std::vector<std::string>& args) {
  if (args.size() != 2 || args[0] != "--model") throw UsageError("encode takes --model FILE (and text on stdin)");
  const Tokenizer tokenizer(args[1]);
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  std::string line;
  for (int64_t id : tokenizer.encode(text)) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
  return 0;
}

int run_data(const std::vector<std::string>& args, int*, char***) {
  if (args.empty()) throw UsageError("which subcommand? accepted: tokenize, encode");
  if (args[0] == "tokenize") return run_tokenize({args.begin() + 1, args.end()});
  if (args[0] == "encode") return run_encode({args.begin() + 1, args.end()});
  throw UsageError("unknown subcommand '" + args[0] + "'; accepted: tokenize, encode");
}

}  // namespace

extern const Command kDataCommand = {
    "data", "prepare training data: BPE-tokenize text into token files, or encode text",
    "usage: mpiaccel data tokenize --input DIR|FILE --output DIR [--vocab-size N | --model FILE]\n"
    "                              [--val-fraction F] [--threads N] [--max-sentences N]\n"
    "       mpiaccel data encode --model FILE < TEXT\n"
    "\n"
    "encode prints the token ids of its standard input through the tokenizer FILE, on\n"
    "one line.\n"
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
