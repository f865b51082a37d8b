// DistributedLoader: the sampler's indices, a batch at a time, across epochs;
// fetched by the calling thread or ahead of it by worker threads
// (batch_prefetcher.hpp), then copied to the device (batch_transfer.hpp).

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "data/batch_prefetcher.hpp"
#include "data/batch_transfer.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/loader.hpp"
#include "runtime/device_streams.hpp"

namespace mpiaccel {

DistributedLoader::DistributedLoader(std::shared_ptr<const Dataset> dataset,
                                     DistributedSampler sampler, int64_t batch_size,
                                     std::string device, LoaderOptions options)
    : dataset_(std::move(dataset)),
      sampler_(std::move(sampler)),
      batch_size_(batch_size),
      device_(std::move(device)),
      options_(options) {
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
  MPIACCEL_CHECK(options_.num_workers >= 0 && options_.prefetch_factor >= 1,
                 "DistributedLoader: num_workers " + std::to_string(options_.num_workers) +
                     " and prefetch_factor " + std::to_string(options_.prefetch_factor) +
                     " must be at least 0 and 1; set [train] num_workers and prefetch_factor");
  delivered_ = {sampler_.epoch(), sampler_.start()};
  if (options_.num_workers > 0)
    workers_ = std::make_unique<detail::BatchPrefetcher>(dataset_, options_.num_workers, pins());
}

DistributedLoader::~DistributedLoader() = default;
DistributedLoader::DistributedLoader(DistributedLoader&&) noexcept = default;
DistributedLoader& DistributedLoader::operator=(DistributedLoader&&) noexcept = default;

bool DistributedLoader::pins() const {
  return options_.pin_memory && !at::Device(device_).is_cpu() && detail::has_streams(at::Device(device_));
}

int64_t DistributedLoader::batches_per_epoch() const {
  const int64_t n = sampler_.dataset_size();
  const int64_t world = sampler_.world_size();
  const int64_t per_rank = sampler_.drop_last() ? n / world : (n + world - 1) / world;
  return sampler_.drop_last() ? per_rank / batch_size_ : (per_rank + batch_size_ - 1) / batch_size_;
}

DistributedLoader::Planned DistributedLoader::plan_next() {
  int64_t left = sampler_.num_samples() - cursor_;
  if (left < batch_size_ && (left == 0 || sampler_.drop_last())) {
    // A restored position can leave nothing (or a dropped tail) of its epoch;
    // the next epoch from its start always has a batch (checked at construction).
    sampler_.set_epoch(sampler_.epoch() + 1, 0);
    cursor_ = 0;
    left = sampler_.num_samples();
  }
  Planned batch;
  const int64_t count = std::min(batch_size_, left);
  batch.indices.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) batch.indices.push_back(sampler_.index(cursor_ + i));
  cursor_ += count;
  batch.after = {sampler_.epoch(), sampler_.start() + cursor_ * sampler_.world_size()};
  return batch;
}

void DistributedLoader::fill_workers() {
  const int64_t depth = options_.num_workers * options_.prefetch_factor;
  while (static_cast<int64_t>(planned_.size()) < depth) {
    planned_.push_back(plan_next());
    workers_->submit(planned_.back().indices);
  }
}

std::vector<int64_t> DistributedLoader::next_indices() {
  if (workers_) fill_workers();
  if (planned_.empty()) planned_.push_back(plan_next());
  return planned_.front().indices;
}

Batch DistributedLoader::next() {
  if (workers_) fill_workers();
  if (planned_.empty()) planned_.push_back(plan_next());
  // Taken off before the fetch: a batch whose fetch fails is not fetched
  // again, and the planned batches stay in step with the workers' queue.
  const Planned planned = std::move(planned_.front());
  planned_.pop_front();
  Batch batch = workers_ ? workers_->take() : dataset_->get(planned.indices);
  if (!workers_ && pins()) batch = detail::pinned(batch);
  delivered_ = planned.after;
  if (workers_) fill_workers();  // the workers fetch while the step runs
  if (at::Device(device_).is_cpu()) return batch;
  return detail::to_device(batch, at::Device(device_), options_.non_blocking);
}

LoaderState DistributedLoader::state() const { return delivered_; }

void DistributedLoader::restore(const LoaderState& state) {
  MPIACCEL_CHECK(state.epoch >= 0 && state.position >= 0,
                 "DistributedLoader::restore: invalid state (epoch " + std::to_string(state.epoch) +
                     ", position " + std::to_string(state.position) + ")");
  if (workers_) workers_->clear();
  planned_.clear();
  sampler_.set_epoch(state.epoch, state.position);
  cursor_ = 0;
  delivered_ = state;
}

}  // namespace mpiaccel
