#pragma once
// Data for training across ranks: a seeded, rank-disjoint, resumable
// DistributedSampler; the DistributedLoader that turns its indices into
// batches; and the bundled datasets (byte-level text, Fashion-MNIST).
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
  DistributedLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                    int64_t batch_size);

  /// The next batch (on the CPU). Starts the next epoch when this one is done.
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

/// The dataset the trainer asks for by [train] dataset: "fortunes" (byte text
/// of `data_dir`, windows of `seq_len`, the last `val_fraction` held out) or
/// "fashion-mnist" (split "val" is the test set). `data_dir` "" = the default
/// location. `split`: "train" or "val".
std::shared_ptr<const Dataset> make_dataset(const std::string& name, const std::string& data_dir,
                                            const std::string& split, int64_t seq_len,
                                            double val_fraction);

}  // namespace mpiaccel
