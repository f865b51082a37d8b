#pragma once
// A map-style Dataset, its Batch, and the DistributedLoader that turns a
// DistributedSampler's indices into batches on a device, resumable at any
// world size (LoaderState).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/sampler.hpp"

namespace mpiaccel {

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

}  // namespace mpiaccel
