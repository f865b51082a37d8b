#pragma once
// A BPE Tokenizer (SentencePiece, loaded at run time) and its training.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpiaccel {

/// A SentencePiece model (BPE, as `mpiaccel data tokenize` trains it): text to
/// ids and back. Copying is not allowed; moving is.
class Tokenizer {
 public:
  Tokenizer();
  /// load(model_path).
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  /// Loads a SentencePiece .model file. Throws Error naming the file.
  void load(const std::string& model_path);
  bool loaded() const;
  /// Pieces of the model (ids are below this).
  int64_t vocab_size() const;
  /// The ids of `text`. With the models train_bpe_tokenizer makes (byte
  /// fallback, identity normalisation, no dummy prefix), decode(encode(t)) == t
  /// for any valid UTF-8 text t, and encoding two texts one after the other gives the
  /// ids of their concatenation when the first ends with a newline.
  std::vector<int64_t> encode(const std::string& text) const;
  /// The text of `ids` (each in [0, vocab_size())).
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct BpeTrainOptions {
  int64_t vocab_size = 2048;
  int num_threads = 2;
  /// Lines sampled for training (SentencePiece's input_sentence_size): bounds
  /// the time on a large corpus; all lines when the corpus has fewer.
  int64_t max_sentences = 200000;
  uint32_t seed = 42;
};

/// Trains a byte-fallback BPE SentencePiece model on the lines of `text` and
/// writes it to `model_path`. Newline is a piece of its own, so encoded text keeps its
/// line structure. Throws Error with SentencePiece's message.
void train_bpe_tokenizer(const std::string& text, const std::string& model_path,
                         const BpeTrainOptions& options = {});

}  // namespace mpiaccel
