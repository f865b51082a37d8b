// DistributedSampler: the epoch permutation and each rank's share of it.
//
// The permutation is ours (splitmix64 + Fisher–Yates with unbiased bounded
// draws), not LibTorch's randperm: a checkpoint resumed with another LibTorch
// version, or after anything else drew from torch's generator, must still see
// the same order.

#include <algorithm>
#include <numeric>
#include <string>

#include "mpiaccel/sampler.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator whose
// output function is also a good hash for turning (seed, epoch) into a state.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ULL); }

  // Uniform in [0, bound) without modulo bias (Lemire 2019): the rejected
  // low products are exactly the surplus 2^64 mod bound.
  uint64_t below(uint64_t bound) {
    unsigned __int128 product = static_cast<unsigned __int128>(next()) * bound;
    auto low = static_cast<uint64_t>(product);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        product = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  MPIACCEL_CHECK(n >= 0, "epoch_permutation: negative size " + std::to_string(n));
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  // Hashing seed and epoch separately keeps (seed, epoch + 1) and (seed + 1,
  // epoch) unrelated streams.
  SplitMix64 rng(mix64(seed) ^ mix64(static_cast<uint64_t>(epoch) + 0x6a09e667f3bcc909ULL));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       uint64_t seed, bool shuffle, bool drop_last)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  MPIACCEL_CHECK(dataset_size > 0, "DistributedSampler: the dataset is empty (size " +
                                       std::to_string(dataset_size) + ")");
  MPIACCEL_CHECK(world_size >= 1 && rank >= 0 && rank < world_size,
                 "DistributedSampler: rank " + std::to_string(rank) + " is not in [0, " +
                     std::to_string(world_size) + ")");
  set_epoch(0);
}

void DistributedSampler::set_epoch(int64_t epoch, int64_t start) {
  MPIACCEL_CHECK(epoch >= 0 && start >= 0, "DistributedSampler::set_epoch: epoch " +
                                               std::to_string(epoch) + " and start " +
                                               std::to_string(start) + " must not be negative");
  if (shuffle_ && (permutation_.empty() || epoch != epoch_)) {
    permutation_ = epoch_permutation(dataset_size_, seed_, epoch);
  }
  epoch_ = epoch;
  start_ = start;
  // What is left of the epoch after `start`, in whole rounds of world_size:
  // rounded down (the tail dropped) or up (wrapping around to pad). Counting
  // from `start` rather than from 0 keeps every rank's count equal even when
  // a resume at another world size starts mid-round.
  const int64_t left = std::max<int64_t>(0, dataset_size_ - start);
  const int64_t world = world_size_;
  num_samples_ = drop_last_ ? left / world : (left + world - 1) / world;
}

int64_t DistributedSampler::at_position(int64_t position) const {
  MPIACCEL_CHECK(position >= 0,
                 "DistributedSampler: negative position " + std::to_string(position));
  const int64_t wrapped = position % dataset_size_;
  return shuffle_ ? permutation_[static_cast<size_t>(wrapped)] : wrapped;
}

int64_t DistributedSampler::index(int64_t i) const {
  MPIACCEL_CHECK(i >= 0 && i < num_samples_,
                 "DistributedSampler::index: sample " + std::to_string(i) + " of rank " +
                     std::to_string(rank_) + " is not in [0, " + std::to_string(num_samples_) +
                     ") of epoch " + std::to_string(epoch_));
  return at_position(start_ + rank_ + i * world_size_);
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) out.push_back(index(i));
  return out;
}

}  // namespace mpiaccel
