#pragma once
// A BPE Tokenizer (SentencePiece, loaded at run time) and its training.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpiaccel {

/// One entry of a tokenizer's vocabulary, as SentencePiece keeps it.
struct TokenizerPiece {
  enum class Kind { normal, unknown, control, user_defined, byte, unused };
  std::string text;  ///< a space is "\xe2\x96\x81" (U+2581); a byte piece is "<0xNN>"
  float score = 0;   ///< BPE: the higher, the earlier its merge
  Kind kind = Kind::normal;
};

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
  /// Every piece, by id.
  std::vector<TokenizerPiece> pieces() const;

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

/// A text corpus to turn into the token files of `[train] dataset = tokens`.
struct TokenizeCorpusOptions {
  std::string input;           ///< a text file, or a directory read as read_text_corpus reads it
  std::string output;          ///< directory of tokenizer.model, train.tokens, val.tokens (created)
  std::string model;           ///< a SentencePiece model to use; "" = train a BPE one on `bpe`
  BpeTrainOptions bpe;
  double val_fraction = 0.05;  ///< share of the bytes held out, split as the byte-level dataset
};

/// One split as tokenize_corpus wrote it.
struct TokenizedSplit {
  std::string path;
  int64_t tokens = 0;
  int64_t bytes = 0;
};

struct TokenizedCorpus {
  std::string model_path;
  int64_t vocab_size = 0;
  TokenizedSplit train;
  TokenizedSplit val;
};

/// Splits the input into training and validation text (text_split), trains
/// the tokenizer on the training part (or copies `model`), and writes
/// OUTPUT/tokenizer.model, val.tokens, then train.tokens: a run killed
/// midway leaves no train.tokens, so token_files_present() says to redo it.
/// Throws Error naming the input or output and what to do.
TokenizedCorpus tokenize_corpus(const TokenizeCorpusOptions& options);

/// True when `dir` holds both train.tokens and val.tokens.
bool token_files_present(const std::string& dir);

}  // namespace mpiaccel
