// [train] tokenize_from: a BPE job's token files, made on its first run.

#include <chrono>
#include <cstdio>
#include <string>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/tokenizer.hpp"
#include "runtime/activity.hpp"
#include "trainer/builtin_model.hpp"

namespace mpiaccel::detail {
namespace {

std::string made_line(const TrainConfig& tc, const TokenizedCorpus& made, double seconds) {
  char line[512];
  std::snprintf(line, sizeof line,
                "tokenized %s into %s: %lld-piece BPE, %lld training and %lld validation tokens "
                "(%.1f s)",
                tc.tokenize_from.c_str(), tc.data_dir.c_str(), static_cast<long long>(made.vocab_size),
                static_cast<long long>(made.train.tokens), static_cast<long long>(made.val.tokens),
                seconds);
  return line;
}

// Rank 0's part: tokenizes when the files are missing. Returns what went
// wrong ("" = nothing).
std::string tokenize_on_main(Accelerator& acc) {
  const TrainConfig& tc = acc.config().train;
  if (token_files_present(tc.data_dir)) {
    acc.print("[train] tokenize_from: the token files in " + tc.data_dir + " are there already; using them");
    return "";
  }
  set_activity("tokenizing " + tc.tokenize_from + " into " + tc.data_dir);
  TokenizeCorpusOptions options;
  options.input = tc.tokenize_from;
  options.output = tc.data_dir;
  options.val_fraction = tc.val_fraction;
  const auto start = std::chrono::steady_clock::now();
  try {
    const TokenizedCorpus made = tokenize_corpus(options);
    acc.print(made_line(tc, made, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  } catch (const Error& e) {
    return "[train] tokenize_from: " + e.message();
  }
  return "";
}

}  // namespace

void prepare_token_files(Accelerator& acc) {
  const TrainConfig& tc = acc.config().train;
  if (tc.tokenize_from.empty()) return;
  MPIACCEL_CHECK(tc.dataset == DatasetChoice::Tokens, "[train] tokenize_from makes token files, for dataset = tokens; "
                                         "set [train] dataset = tokens or remove tokenize_from");
  MPIACCEL_CHECK(!tc.data_dir.empty(), "[train] tokenize_from needs [train] data_dir: the directory "
                                       "its token files go to");
  // Rank 0 alone looks and writes; the others wait here, under the
  // communicator's deadline ([distributed] timeout_s), and fail with rank 0's
  // message if it failed.
  const std::string why = acc.is_main_process() ? tokenize_on_main(acc) : "";
  all_ok(acc.comm(), why.empty(), why);
}

}  // namespace mpiaccel::detail
