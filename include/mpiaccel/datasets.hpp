#pragma once
// The datasets: byte-level text (the bundled "fortunes"), Fashion-MNIST,
// rows of HDF5 arrays, and make_dataset, which builds any of them (and token
// files, mpiaccel/token_data.hpp) by [train] dataset.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/loader.hpp"

namespace mpiaccel {

struct TrainConfig;

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
  /// Whether get() reads with pread, never waiting for the process's HDF5
  /// lock: the arrays are contiguous, uncompressed, little-endian standard
  /// types (h5py's default). Otherwise get() reads by H5Dread under the lock,
  /// one thread at a time (docs/data_and_models.md, "Loader workers").
  bool reads_directly() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
