// Tokenizer: a pimpl over SentencePiece's processor, so no SentencePiece type
// reaches the public header. The processor lives in libmpiaccel_sentencepiece,
// loaded apart from LibTorch (sentencepiece_api.hpp says why).

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/sentencepiece_api.hpp"
#include "mpiaccel/tokenizer.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

struct Tokenizer::Impl {
  Impl(void* p, std::string model_path) : processor(p), path(std::move(model_path)) {}
  ~Impl() { detail::sentencepiece_api().free(processor); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  void* processor;  // a sentencepiece::SentencePieceProcessor of the shim
  std::string path;
};

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(const std::string& model_path) { load(model_path); }
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::load(const std::string& model_path) {
  const detail::SentencePieceApi& api = detail::sentencepiece_api();
  std::string error;
  void* processor = api.load(&model_path, &error);
  MPIACCEL_CHECK(processor != nullptr, "cannot load tokenizer model " + model_path + ": " + error +
                                           "; make one with `mpiaccel data tokenize --output DIR`");
  impl_ = std::make_unique<Impl>(processor, model_path);
}

bool Tokenizer::loaded() const { return impl_ != nullptr; }

int64_t Tokenizer::vocab_size() const {
  MPIACCEL_CHECK(impl_ != nullptr, "Tokenizer: no model loaded (call load)");
  return detail::sentencepiece_api().vocab_size(impl_->processor);
}

std::vector<int64_t> Tokenizer::encode(const std::string& text) const {
  MPIACCEL_CHECK(impl_ != nullptr, "Tokenizer: no model loaded (call load)");
  // Line by line: newline is a piece of its own, so this gives the same ids as
  // one call, and SentencePiece is several times faster on short inputs.
  std::vector<int64_t> out;
  out.reserve(text.size() / 2);
  const detail::SentencePieceApi& api = detail::sentencepiece_api();
  std::vector<int> ids;
  std::string error;
  const std::string_view all(text);
  size_t first = 0;
  while (first < all.size()) {
    size_t end = all.find('\n', first);
    end = end == std::string_view::npos ? all.size() : end + 1;
    MPIACCEL_CHECK(api.encode(impl_->processor, all.data() + first, end - first, &ids, &error) == 0,
                   "tokenizer " + impl_->path + ": cannot encode: " + error);
    out.insert(out.end(), ids.begin(), ids.end());
    first = end;
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
  MPIACCEL_CHECK(impl_ != nullptr, "Tokenizer: no model loaded (call load)");
  const detail::SentencePieceApi& api = detail::sentencepiece_api();
  const int64_t vocab = api.vocab_size(impl_->processor);
  std::vector<int> narrow;
  narrow.reserve(ids.size());
  for (const int64_t id : ids) {
    MPIACCEL_CHECK(id >= 0 && id < vocab, "tokenizer " + impl_->path + ": id " + std::to_string(id) +
                                              " is not in [0, " + std::to_string(vocab) + ")");
    narrow.push_back(static_cast<int>(id));
  }
  std::string text;
  std::string error;
  MPIACCEL_CHECK(api.decode(impl_->processor, &narrow, &text, &error) == 0,
                 "tokenizer " + impl_->path + ": cannot decode: " + error);
  return text;
}

std::vector<TokenizerPiece> Tokenizer::pieces() const {
  MPIACCEL_CHECK(impl_ != nullptr, "Tokenizer: no model loaded (call load)");
  const detail::SentencePieceApi& api = detail::sentencepiece_api();
  const int count = api.vocab_size(impl_->processor);
  std::vector<TokenizerPiece> out(static_cast<size_t>(count));
  constexpr TokenizerPiece::Kind kKinds[] = {TokenizerPiece::Kind::normal, TokenizerPiece::Kind::unknown,
                                             TokenizerPiece::Kind::control, TokenizerPiece::Kind::unused,
                                             TokenizerPiece::Kind::byte};
  for (int id = 0; id < count; ++id) {
    TokenizerPiece& piece = out[static_cast<size_t>(id)];
    int kind = 0;
    api.piece(impl_->processor, id, &piece.text, &piece.score, &kind);
    piece.kind = kKinds[kind];
  }
  // SentencePiece lays out its meta pieces (unknown, control, user-defined)
  // before the byte pieces and the learned ones: with byte fallback, the
  // "normal" pieces before the first byte are the user-defined ones.
  for (TokenizerPiece& piece : out) {
    if (piece.kind == TokenizerPiece::Kind::byte) break;
    if (piece.kind == TokenizerPiece::Kind::normal) piece.kind = TokenizerPiece::Kind::user_defined;
  }
  const bool has_bytes = std::any_of(out.begin(), out.end(),
                                     [](const TokenizerPiece& p) { return p.kind == TokenizerPiece::Kind::byte; });
  if (!has_bytes)
    for (TokenizerPiece& piece : out)
      if (piece.kind == TokenizerPiece::Kind::user_defined) piece.kind = TokenizerPiece::Kind::normal;
  return out;
}

}  // namespace mpiaccel
