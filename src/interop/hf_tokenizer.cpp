// A SentencePiece BPE model as a `tokenizers` BPE (see hf_tokenizer.hpp).
//
// SentencePiece's BPE encodes by repeatedly merging the adjacent pair whose
// merged piece scores highest; `tokenizers` merges the pair of lowest rank.
// So each learned piece contributes its splits into two known pieces as
// merges, ranked by the merged piece's score (transformers'
// SentencePieceExtractor does the same). Around the model:
//  - spaces become U+2581, as SentencePiece escapes them (identity
//    normalisation otherwise, no dummy prefix: the options train_bpe_tokenizer uses);
//  - user-defined pieces (the newline) and <unk> are added tokens, matched
//    before the model as SentencePiece matches them;
//  - a character without a piece becomes its UTF-8 bytes' <0xNN> pieces
//    (byte_fallback), and decoding fuses them back.

#include "interop/hf_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "mpiaccel/error.hpp"
#include "mpiaccel/tokenizer.hpp"

namespace mpiaccel::detail {
namespace {

namespace fs = std::filesystem;
using Kind = TokenizerPiece::Kind;
constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

nlohmann::ordered_json added_token(int64_t id, const std::string& text, bool special) {
  return {{"id", id},         {"content", text},     {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", special}};
}

// Every split of a learned piece into two pieces of the vocabulary, ranked
// by the merged piece's score (highest first), then by the halves' ids.
nlohmann::ordered_json bpe_merges(const std::vector<TokenizerPiece>& pieces,
                                  const std::map<std::string, int64_t>& ids) {
  std::vector<std::tuple<float, int64_t, int64_t, std::string, std::string>> merges;
  for (const TokenizerPiece& piece : pieces) {
    if (piece.kind != Kind::normal) continue;
    for (size_t cut = 1; cut < piece.text.size(); ++cut) {
      const std::string left = piece.text.substr(0, cut), right = piece.text.substr(cut);
      const auto l = ids.find(left), r = ids.find(right);
      if (l != ids.end() && r != ids.end()) merges.emplace_back(-piece.score, l->second, r->second, left, right);
    }
  }
  std::sort(merges.begin(), merges.end());
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : merges) out.push_back({std::get<3>(m), std::get<4>(m)});
  return out;
}

nlohmann::ordered_json tokenizer_json(const std::vector<TokenizerPiece>& pieces) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  std::map<std::string, int64_t> ids;
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  std::string unk = "<unk>";
  for (size_t id = 0; id < pieces.size(); ++id) {
    const TokenizerPiece& p = pieces[id];
    vocab[p.text] = id;
    if (p.kind == Kind::normal) ids.emplace(p.text, static_cast<int64_t>(id));
    if (p.kind == Kind::unknown) unk = p.text;
    if (p.kind == Kind::unknown || p.kind == Kind::control || p.kind == Kind::user_defined)
      added.push_back(added_token(static_cast<int64_t>(id), p.text, p.kind != Kind::user_defined));
  }
  nlohmann::ordered_json t;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  t["pre_tokenizer"] = nullptr;
  t["post_processor"] = nullptr;
  t["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}}}}};
  t["model"] = {{"type", "BPE"},          {"dropout", nullptr},           {"unk_token", unk},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},       {"byte_fallback", true},        {"ignore_merges", false},
                {"vocab", vocab},         {"merges", bpe_merges(pieces, ids)}};
  return t;
}

void write_json(const fs::path& path, const nlohmann::ordered_json& json) {
  std::ofstream file(path, std::ios::trunc);
  file << json.dump(2) << "\n";
  MPIACCEL_CHECK(file.good(), "cannot write " + path.string());
}

}  // namespace

std::vector<std::string> export_hf_tokenizer(const std::string& model_file, const std::string& dir) {
  const std::vector<TokenizerPiece> pieces = Tokenizer(model_file).pieces();
  MPIACCEL_CHECK(std::any_of(pieces.begin(), pieces.end(), [](const TokenizerPiece& p) { return p.kind == Kind::byte; }),
                 model_file + " has no byte pieces: only byte-fallback BPE models (mpiaccel data tokenize's) "
                              "export to tokenizer.json");
  fs::copy_file(model_file, fs::path(dir) / "tokenizer.model", fs::copy_options::overwrite_existing);
  write_json(fs::path(dir) / "tokenizer.json", tokenizer_json(pieces));
  nlohmann::ordered_json config;
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  const auto unknown = std::find_if(pieces.begin(), pieces.end(),
                                    [](const TokenizerPiece& p) { return p.kind == Kind::unknown; });
  config["unk_token"] = unknown == pieces.end() ? "<unk>" : unknown->text;
  config["bos_token"] = nullptr;
  config["eos_token"] = nullptr;
  config["add_bos_token"] = false;
  config["add_eos_token"] = false;
  config["clean_up_tokenization_spaces"] = false;
  write_json(fs::path(dir) / "tokenizer_config.json", config);
  return {"tokenizer.model", "tokenizer.json", "tokenizer_config.json"};
}

}  // namespace mpiaccel::detail
