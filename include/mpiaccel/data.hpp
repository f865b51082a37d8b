#pragma once
// Data for training across ranks: a seeded, rank-disjoint, resumable
// DistributedSampler; the DistributedLoader that turns its indices into
// batches; the bundled datasets (byte-level text, Fashion-MNIST); and users'
// data: token files (memory-mapped uint16/uint32 ids, written by
// `mpiaccel data tokenize` or write_token_file), a BPE Tokenizer, and rows of
// HDF5 arrays read by hyperslab.
// docs/data_and_models.md gives the exact sampling order.
//
// Nothing here communicates: rank and world size are plain numbers, and every
// rank computes the same permutation from (seed, epoch) on its own.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpiaccel {

struct TrainConfig;

/// Splits each epoch's permutation of [0, dataset_size) across ranks, like
/// PyTorch's DistributedSampler: rank r gets stream[start + r], stream[start + r
/// + world], ... where stream is the epoch's permutation (wrapped around when
/// padding). Each epoch is consumed front to back, `world` positions per round,
/// so a global step of world·B samples always covers one contiguous block of
/// the stream whatever the world size. That is what makes a resume at another
/// world size (same global batch) continue with exactly the same samples.
///
/// The permutation comes from our own splitmix64 + Fisher–Yates, seeded by
/// (seed, epoch): independent of LibTorch's generators and of its version.
class DistributedSampler {
 public:
  /// `drop_last`: an epoch ends at the last full round of `world_size`
  /// samples (the tail is dropped); otherwise the stream wraps around to the
  /// permutation's beginning so every rank gets the same count.
  DistributedSampler(int64_t dataset_size, int rank, int world_size, uint64_t seed,
                     bool shuffle = true, bool drop_last = true);

  /// Moves to `epoch`, starting at global position `start` of its stream
  /// (0 = the beginning; a checkpoint's position to resume). Positions before
  /// `start` are skipped without being computed or read.
  void set_epoch(int64_t epoch, int64_t start = 0);

  int64_t epoch() const { return epoch_; }
  /// The global position the current epoch started from (set_epoch).
  int64_t start() const { return start_; }
  /// This rank's samples in the current epoch from start(); equal on every rank.
  int64_t num_samples() const { return num_samples_; }
  /// The global position just past the current epoch's last sample.
  int64_t end() const { return start_ + num_samples_ * world_size_; }

  /// This rank's `i`-th sample of the current epoch (0 <= i < num_samples()).
  int64_t index(int64_t i) const;
  /// index(0), ..., index(num_samples() - 1).
  std::vector<int64_t> indices() const;
  /// The dataset index at global position `position` of the current epoch's
  /// stream (any rank's view: index(i) == at_position(start() + rank + world·i)).
  int64_t at_position(int64_t position) const;

  int64_t dataset_size() const { return dataset_size_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }

 private:
  int64_t dataset_size_;
  int rank_;
  int world_size_;
  uint64_t seed_;
  bool shuffle_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t start_ = 0;
  int64_t num_samples_ = 0;
  std::vector<int64_t> permutation_;  // empty when !shuffle_ (the identity)
};

/// The permutation of [0, n) that DistributedSampler uses for (seed, epoch).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

/// One batch: `input` and `target` with the batch on dim 0.
struct Batch {
  at::Tensor input;
  at::Tensor target;
};

/// A map-style dataset: samples addressed by index, fetched a batch at a time.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  /// The samples `indices` (each in [0, size())), stacked on dim 0.
  virtual Batch get(const std::vector<int64_t>& indices) const = 0;
};

/// Where a loader is in the data: enough to continue exactly, at any world size.
struct LoaderState {
  int64_t epoch = 0;
  /// Global samples of this epoch's stream consumed by all ranks together.
  int64_t position = 0;
};

inline bool operator==(const LoaderState& a, const LoaderState& b) {
  return a.epoch == b.epoch && a.position == b.position;
}

/// Batches of `batch_size` samples for this rank, in the sampler's order,
/// moving to the next epoch by itself. With the sampler's drop_last an epoch's
/// incomplete last batch is skipped too (every batch is full, on every rank);
/// without it the last batch is shorter, by the same amount on every rank.
class DistributedLoader {
 public:
  /// `device`: where next() delivers batches ("cpu", "cuda:N"; the
  /// Accelerator's make_loader passes its own).
  DistributedLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                    int64_t batch_size, std::string device = "cpu");

  /// The next batch, on the loader's device (a GPU's through pinned memory,
  /// asynchronously on the current stream). Starts the next epoch when this
  /// one is done.
  Batch next();
  /// The dataset indices next() would fetch, without fetching them.
  std::vector<int64_t> next_indices();

  /// The position after the last batch returned: equal on every rank.
  LoaderState state() const;
  /// Continues from `state` (taken at any world size): the next batch is the
  /// one that followed it. Reads nothing that is skipped.
  void restore(const LoaderState& state);

  int64_t epoch() const { return sampler_.epoch(); }
  int64_t batch_size() const { return batch_size_; }
  /// Batches per rank in an epoch started from its beginning.
  int64_t batches_per_epoch() const;
  const DistributedSampler& sampler() const { return sampler_; }
  const Dataset& dataset() const { return *dataset_; }

 private:
  /// Moves to the next epoch when the current one has no batch left.
  void advance_if_done();

  std::shared_ptr<const Dataset> dataset_;
  DistributedSampler sampler_;
  int64_t batch_size_;
  std::string device_;
  int64_t cursor_ = 0;  // this rank's samples consumed since sampler_.start()
};

/// Byte-level text: the concatenated bytes of a corpus, cut into windows.
/// Sample i is bytes [i·seq_len, i·seq_len + seq_len + 1): `input` its first
/// seq_len bytes, `target` the same shifted by one, both int64 [seq_len].
class TextDataset : public Dataset {
 public:
  /// `bytes`: a 1-D uint8 CPU tensor with at least seq_len + 1 bytes.
  TextDataset(at::Tensor bytes, int64_t seq_len);

  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override;

  int64_t seq_len() const { return seq_len_; }
  const at::Tensor& bytes() const { return bytes_; }

 private:
  at::Tensor bytes_;
  int64_t seq_len_;
  int64_t size_;
};

/// Default corpus directory of the "fortunes" dataset (Debian package fortunes).
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
/// Default directory of the Fashion-MNIST IDX files (package dataset-fashion-mnist).
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// Every regular file of `dir` (not `.dat` strfile indexes, hidden files or
/// subdirectories; a file reached twice through symlinks is read once), sorted
/// by name, concatenated: a 1-D uint8 tensor. Throws Error naming the Debian
/// package when the directory is missing or holds no text.
at::Tensor read_text_corpus(const std::string& dir);

/// Splits `bytes` into train (the head) and validation (the last
/// `val_fraction`), the split `name`d "train" or "val".
at::Tensor text_split(const at::Tensor& bytes, const std::string& name, double val_fraction);

/// Fashion-MNIST from its IDX .gz files: `input` float32 [1, 28, 28]
/// normalised as (x/255 - 0.2860)/0.3530, `target` the int64 label 0..9.
class FashionMnistDataset : public Dataset {
 public:
  /// `split`: "train" (train-*, 60000 images) or "test" (t10k-*, 10000).
  FashionMnistDataset(const std::string& dir, const std::string& split);

  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override;

  /// The raw pixels, uint8 [N, 28, 28], and labels, int64 [N].
  const at::Tensor& images() const { return images_; }
  const at::Tensor& labels() const { return labels_; }

  static constexpr double kMean = 0.2860;
  static constexpr double kStd = 0.3530;

 private:
  at::Tensor images_;
  at::Tensor labels_;
  int64_t size_;
};

// ---- token files ------------------------------------------------------------
// A token file is a 32-byte little-endian header (the 8 bytes "MPIATOKS",
// then version, dtype, count, vocabulary) followed by `count` token ids of `dtype`. docs/data_and_models.md has the
// byte layout.

/// Bytes per token id on disk; the value is the header's dtype field.
enum class TokenDtype : uint32_t { kUint16 = 2, kUint32 = 4 };

inline constexpr char kTokenFileMagic[9] = "MPIATOKS";
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 32;

/// The smallest dtype that holds ids below `vocab_size`.
TokenDtype token_dtype_for(int64_t vocab_size);

/// Writes `tokens` (each in [0, vocab_size)) to `path` as a token file of
/// `dtype` (by default the smallest that fits the vocabulary). Written to
/// `path`.tmp and renamed, so a reader never sees half a file. Throws Error.
void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int64_t vocab_size);
void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int64_t vocab_size, TokenDtype dtype);

/// A token file mapped read-only into memory: ranks on one node share its
/// pages through the page cache, and only what is read is paged in. The
/// header is checked on open (magic, version, dtype, vocabulary, count
/// against the file size); each problem is an Error naming the file and
/// what to do. Ids are not scanned on open (a corpus can be many GB); read()
/// checks the ids it returns against the vocabulary.
class TokenFile {
 public:
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  TokenDtype dtype() const { return dtype_; }
  /// Token ids in the file.
  int64_t size() const { return count_; }
  /// Every id is below this (the tokenizer's vocabulary).
  int64_t vocab_size() const { return vocab_size_; }

  /// Ids [start, start + count) as int64 into `out`. Throws on a range outside
  /// the file or an id not below vocab_size().
  void read(int64_t start, int64_t count, int64_t* out) const;
  /// Ids [start, start + count) as a 1-D int64 tensor.
  at::Tensor slice(int64_t start, int64_t count) const;

 private:
  std::string path_;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int64_t count_ = 0;
  int64_t vocab_size_ = 0;
  const unsigned char* map_ = nullptr;  // the whole file, header included
  size_t map_bytes_ = 0;
};

/// Windows of a token file, like TextDataset: sample i is ids
/// [i·seq_len, i·seq_len + seq_len + 1), `input` its first seq_len ids and
/// `target` the same shifted by one, both int64 [seq_len].
class TokenDataset : public Dataset {
 public:
  TokenDataset(std::shared_ptr<const TokenFile> file, int64_t seq_len);
  /// Maps `path` (TokenFile).
  TokenDataset(const std::string& path, int64_t seq_len);

  int64_t size() const override { return size_; }
  Batch get(const std::vector<int64_t>& indices) const override;

  int64_t seq_len() const { return seq_len_; }
  int64_t vocab_size() const { return file_->vocab_size(); }
  const TokenFile& file() const { return *file_; }

 private:
  std::shared_ptr<const TokenFile> file_;
  int64_t seq_len_;
  int64_t size_;
};

// ---- tokenizer ----------------------------------------------------------------

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

// ---- HDF5 arrays ------------------------------------------------------------

/// Rows of HDF5 datasets: `input` is row i of `inputs_path` as float32 (any
/// integer or float type in the file is converted on read), `target` row i of
/// `labels_path` as int64 (an integer type), or, with no labels, the input
/// itself. Only rows [first_row, first_row + rows) are visible (a split of
/// the file). The file stays open; get() reads just its samples with a
/// hyperslab selection (independent, serial I/O: every rank opens the file on
/// its own), so no rank ever holds the whole array.
class Hdf5Dataset : public Dataset {
 public:
  /// `rows` -1: to the last row. `labels_path` "": none.
  Hdf5Dataset(const std::string& path, const std::string& inputs_path,
              const std::string& labels_path, int64_t first_row = 0, int64_t rows = -1);
  ~Hdf5Dataset() override;
  Hdf5Dataset(const Hdf5Dataset&) = delete;
  Hdf5Dataset& operator=(const Hdf5Dataset&) = delete;

  int64_t size() const override;
  Batch get(const std::vector<int64_t>& indices) const override;

  /// All rows of the inputs dataset in the file (not only this split's).
  int64_t file_rows() const;
  /// Shape of one input sample (the dataset's shape without dim 0).
  std::vector<int64_t> sample_shape() const;
  bool has_labels() const;
  /// Rows read from the file so far (distinct rows of each get()).
  int64_t rows_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- by name ------------------------------------------------------------------

/// The dataset the trainer asks for by [train] dataset, split "train" or "val":
/// - "fortunes": byte text of `data_dir`, windows of `seq_len`, the last
///   `val_fraction` held out;
/// - "fashion-mnist": split "val" is the test set;
/// - "tokens": `data_dir`/train.tokens or val.tokens, windows of `seq_len`;
/// - "hdf5": `data_dir` is an HDF5 file (the last `val_fraction` of rows held
///   out) or a directory with train.h5 (and val.h5, else the held-out tail);
///   datasets `hdf5_inputs` and `hdf5_labels`.
/// `data_dir` "" = the default location (fortunes, fashion-mnist).
std::shared_ptr<const Dataset> make_dataset(const TrainConfig& train, const std::string& split);

/// make_dataset with the other [train] keys at their defaults (hdf5_inputs =
/// /inputs, hdf5_labels = /labels).
std::shared_ptr<const Dataset> make_dataset(const std::string& name, const std::string& data_dir,
                                            const std::string& split, int64_t seq_len,
                                            double val_fraction);

/// The vocabulary the data needs of a language model: 256 for "fortunes"
/// (bytes), the train token file's for "tokens" (read from its header), 0 for
/// datasets that are not token sequences.
int64_t dataset_vocab_size(const TrainConfig& train);

/// Throws Error when `model_vocab_size` ([model] vocab_size) is smaller than
/// dataset_vocab_size(train), saying which value to set.
void check_model_vocab_size(const TrainConfig& train, int64_t model_vocab_size);

}  // namespace mpiaccel
