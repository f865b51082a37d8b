#pragma once
// The BPE tokenizer of a run on token files as Hugging Face tokenizers load
// it: tokenizer.json (the `tokenizers` library's format, which
// transformers.AutoTokenizer reads without SentencePiece), beside the
// SentencePiece tokenizer.model itself.

#include <string>
#include <vector>

namespace mpiaccel::detail {

/// Writes `model_file` (a SentencePiece BPE model, as `mpiaccel data
/// tokenize` trains it) into `dir` as tokenizer.model, tokenizer.json and
/// tokenizer_config.json. Returns the files written. AutoTokenizer's ids
/// equal the Tokenizer's (tests/scripts/test_hf_llama.sh checks it).
std::vector<std::string> export_hf_tokenizer(const std::string& model_file, const std::string& dir);

}  // namespace mpiaccel::detail
