// DistributedLoader: the sampler's indices, a batch at a time, across epochs.

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "mpiaccel/loader.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

namespace {

// A host tensor on `device`: through pinned memory, so the copy is queued on
// the current stream and the host goes on.
at::Tensor on_device(const at::Tensor& t, const at::Device& device) {
  if (!t.defined() || t.device() == device) return t;
  return t.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

DistributedLoader::DistributedLoader(std::shared_ptr<const Dataset> dataset,
                                     DistributedSampler sampler, int64_t batch_size,
                                     std::string device)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      batch_size_(batch_size),
      device_(std::move(device)) {
  MPIACCEL_CHECK(dataset_ != nullptr, "DistributedLoader: no dataset");
  MPIACCEL_CHECK(batch_size_ >= 1, "DistributedLoader: batch_size must be at least 1, not " +
                                       std::to_string(batch_size_));
  MPIACCEL_CHECK(sampler_.dataset_size() == dataset_->size(),
                 "DistributedLoader: the sampler covers " +
                     std::to_string(sampler_.dataset_size()) + " samples but the dataset has " +
                     std::to_string(dataset_->size()));
  // Without a single batch per epoch, next() would skip epochs forever.
  MPIACCEL_CHECK(batches_per_epoch() >= 1,
                 "DistributedLoader: a dataset of " + std::to_string(dataset_->size()) +
                     " samples gives each of " + std::to_string(sampler_.world_size()) +
                     " ranks fewer samples per epoch than one batch of " +
                     std::to_string(batch_size_) + "; use a smaller batch_size or fewer ranks");
}

int64_t DistributedLoader::batches_per_epoch() const {
  const int64_t n = sampler_.dataset_size();
  const int64_t world = sampler_.world_size();
  const int64_t per_rank = sampler_.drop_last() ? n / world : (n + world - 1) / world;
  return sampler_.drop_last() ? per_rank / batch_size_ : (per_rank + batch_size_ - 1) / batch_size_;
}

void DistributedLoader::advance_if_done() {
  const int64_t left = sampler_.num_samples() - cursor_;
  if (left >= batch_size_ || (left > 0 && !sampler_.drop_last())) return;
  // A restored position can leave nothing (or a dropped tail) of its epoch;
  // the next epoch from its start always has a batch (checked at construction).
  sampler_.set_epoch(sampler_.epoch() + 1, 0);
  cursor_ = 0;
}

std::vector<int64_t> DistributedLoader::next_indices() {
  advance_if_done();
  const int64_t count = std::min(batch_size_, sampler_.num_samples() - cursor_);
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) indices.push_back(sampler_.index(cursor_ + i));
  return indices;
}

Batch DistributedLoader::next() {
  std::vector<int64_t> indices = next_indices();
  cursor_ += static_cast<int64_t>(indices.size());
  Batch batch = dataset_->get(indices);
  if (device_ == "cpu") return batch;
  const at::Device device(device_);
  return {on_device(batch.input, device), on_device(batch.target, device)};
}

LoaderState DistributedLoader::state() const {
  return {sampler_.epoch(), sampler_.start() + cursor_ * sampler_.world_size()};
}

void DistributedLoader::restore(const LoaderState& state) {
  MPIACCEL_CHECK(state.epoch >= 0 && state.position >= 0,
                 "DistributedLoader::restore: invalid state (epoch " + std::to_string(state.epoch) +
                     ", position " + std::to_string(state.position) + ")");
  sampler_.set_epoch(state.epoch, state.position);
  cursor_ = 0;
}

}  // namespace mpiaccel
