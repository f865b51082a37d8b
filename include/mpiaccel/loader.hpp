#pragma once
// A map-style Dataset, its Batch, and the DistributedLoader that turns a
// DistributedSampler's indices into batches on a device, resumable at any
// world size (LoaderState).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
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
/// With loader workers (LoaderOptions::num_workers > 0), get() is called from
/// several threads at once: it must only read shared state (the bundled
/// datasets do; an HDF5 dataset serialises what must be, see datasets.hpp).
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

namespace detail {
class BatchPrefetcher;
}

/// How a loader assembles batches and hands them to the device: [train]
/// num_workers, prefetch_factor, pin_memory and non_blocking
/// (docs/data_and_models.md, "Loader workers"). None changes which samples a
/// batch holds, their order, or where a resume continues.
struct LoaderOptions {
  /// Threads that fetch the next batches while the step runs (0: next()
  /// fetches each batch itself).
  int64_t num_workers = 0;
  /// Batches each worker keeps ready: num_workers × prefetch_factor in flight.
  int64_t prefetch_factor = 2;
  /// Page-locked host batches when the device is a GPU (moot on the CPU).
  bool pin_memory = true;
  /// Copy to the GPU on a side stream that the compute stream waits for by an
  /// event; false: next() returns when the copy is done (moot on the CPU).
  bool non_blocking = false;
};

/// Batches of `batch_size` samples for this rank, in the sampler's order,
/// moving to the next epoch by itself. With the sampler's drop_last an epoch's
/// incomplete last batch is skipped too (every batch is full, on every rank);
/// without it the last batch is shorter, by the same amount on every rank.
class DistributedLoader {
 public:
  /// `device`: where next() delivers batches ("cpu", "cuda:N"; the
  /// Accelerator's make_loader passes its own and the [train] options).
  DistributedLoader(std::shared_ptr<const Dataset> dataset, DistributedSampler sampler,
                    int64_t batch_size, std::string device = "cpu", LoaderOptions options = {});
  ~DistributedLoader();
  DistributedLoader(DistributedLoader&&) noexcept;
  DistributedLoader& operator=(DistributedLoader&&) noexcept;

  /// The next batch, on the loader's device. Starts the next epoch when this
  /// one is done. Rethrows what the dataset threw for this batch.
  Batch next();
  /// The dataset indices of the batch next() returns, without fetching it.
  std::vector<int64_t> next_indices();

  /// The position after the last batch returned: equal on every rank.
  LoaderState state() const;
  /// Continues from `state` (taken at any world size): the next batch is the
  /// one that followed it. Reads nothing that is skipped.
  void restore(const LoaderState& state);

  /// The epoch of the last batch returned (state().epoch).
  int64_t epoch() const { return delivered_.epoch; }
  int64_t batch_size() const { return batch_size_; }
  /// Batches per rank in an epoch started from its beginning.
  int64_t batches_per_epoch() const;
  /// The sampler; with workers it may be some batches ahead of state().
  const DistributedSampler& sampler() const { return sampler_; }
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

 private:
  /// A batch chosen but not yet returned: its samples, and the loader's
  /// state once it is returned.
  struct Planned {
    std::vector<int64_t> indices;
    LoaderState after;
  };
  /// Chooses the next batch: moves the sampler on (to the next epoch when
  /// this one has no batch left).
  Planned plan_next();
  /// Plans and submits batches until num_workers × prefetch_factor are in flight.
  void fill_workers();
  /// Whether host batches are page-locked: pin_memory and a GPU device.
  bool pins() const;

  std::shared_ptr<const Dataset> dataset_;
  DistributedSampler sampler_;
  int64_t batch_size_;
  std::string device_;
  LoaderOptions options_;
  int64_t cursor_ = 0;       // this rank's samples planned since sampler_.start()
  LoaderState delivered_;    // the state after the last batch returned
  std::deque<Planned> planned_;  // planned, not returned: submitted to the workers or peeked
  std::unique_ptr<detail::BatchPrefetcher> workers_;  // null without workers
};

}  // namespace mpiaccel
