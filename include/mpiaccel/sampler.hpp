#pragma once
// The DistributedSampler: a seeded, rank-disjoint, resumable split of every
// epoch's permutation across ranks (docs/data_and_models.md gives the exact
// sampling order). Nothing here communicates: rank and world size are plain
// numbers, and every rank computes the same permutation from (seed, epoch).

#include <cstdint>
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

}  // namespace mpiaccel
