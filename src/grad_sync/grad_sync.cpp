// The backward state machine of the gradient-communicating strategies (see
// grad_sync.hpp).

#include "grad_sync/grad_sync.hpp"

#include "runtime/trace.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>

#include <algorithm>
#include <cstring>

#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"

namespace mpiaccel::detail {

void wait_at_shutdown(const WorkHandle& work, const std::string& owner) noexcept {
  if (!work) return;
  try {
    work->wait();
  } catch (const std::exception& e) {
    log_error(owner + ": a collective failed during shutdown: " + e.what());
  }
}

void trace_work(const std::string& name, const WorkHandle& work) {
  Tracer& tracer = Tracer::instance();
  if (work && tracer.enabled() && work->test())
    tracer.record(name, TraceLane::Communication, work->started_at(), work->finished_at());
}

GradSync::GradSync(std::vector<at::Tensor> params, std::vector<std::string> names,
                   std::shared_ptr<Communicator> status_comm, GradSyncOptions options)
    : params_(std::move(params)),
      names_(std::move(names)),
      status_comm_(std::move(status_comm)),
      options_(std::move(options)) {
  const std::string& owner = options_.owner;
  MPIACCEL_CHECK(status_comm_, owner + ": no communicator");
  MPIACCEL_CHECK(names_.size() == params_.size(), owner + ": one name per parameter needed");
  MPIACCEL_CHECK(!params_.empty(), owner + ": the model has no parameter that requires grad");
  for (size_t i = 0; i < params_.size(); ++i)
    MPIACCEL_CHECK(params_[i].requires_grad() && params_[i].is_leaf(),
                   owner + ": parameter " + names_[i] + " is not a leaf that requires grad");
  fired_.assign(params_.size(), 0);
  staged_.assign(params_.size(), 0);
  used_.assign(params_.size(), 0);
}

GradSync::~GradSync() { stop_hooks(); }

void GradSync::start_hooks() {
  MPIACCEL_CHECK(!buckets_.empty(), options_.owner + ": no buckets set");
  hooks_ = std::make_unique<GradReadyHooks>(params_, names_, options_.owner,
                                            [this](size_t i) { on_grad_ready(i); });
}

void GradSync::stop_hooks() { hooks_.reset(); }

void GradSync::set_buckets(std::vector<std::vector<size_t>> buckets) {
  MPIACCEL_CHECK(!in_backward_, options_.owner + ": buckets cannot change during a backward pass");
  std::vector<char> placed(params_.size(), 0);
  size_t placements = 0;
  place_.assign(params_.size(), {0, 0});
  pending_.clear();
  for (size_t b = 0; b < buckets.size(); ++b) {
    for (size_t s = 0; s < buckets[b].size(); ++s) {
      const size_t i = buckets[b][s];
      MPIACCEL_CHECK(i < params_.size() && !placed[i],
                     options_.owner + ": parameter " + std::to_string(i) + " is in two buckets");
      placed[i] = 1;
      place_[i] = {b, s};
      ++placements;
    }
    pending_.push_back(buckets[b].size());
  }
  MPIACCEL_CHECK(placements == params_.size(), options_.owner + ": a parameter is in no bucket");
  buckets_ = std::move(buckets);
  next_bucket_ = 0;
}

void GradSync::set_gradient_sync(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  MPIACCEL_CHECK(!in_backward_, options_.owner + ": gradient sync cannot change during a backward pass");
  sync_ = enabled;
}

bool GradSync::gradient_sync() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sync_;
}

void GradSync::begin_backward() {
  if (in_backward_) return;
  in_backward_ = true;
  finalized_ = false;
  torch::autograd::Engine::get_default_engine().queue_callback([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    finalize_locked();
  });
}

void GradSync::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_backward();
  MPIACCEL_CHECK(!fired_[i],
                 options_.owner + ": parameter " + names_[i] +
                     " received its gradient twice in one backward (reentrant activation "
                     "checkpointing or a parameter shared between modules?); " +
                     options_.owner + " reduces each gradient once per backward");
  fired_[i] = 1;
  used_[i] = 1;
  if (recording_order_) observed_order_.push_back(i);
  const size_t bucket = place_[i].first;
  if (!sync_) {
    on_unsynced_grad(i);
    if (--pending_[bucket] == 0) on_bucket_filled(bucket);
    return;
  }
  stage(i);
  staged_[i] = 1;
  if (--pending_[bucket] == 0) {
    on_bucket_filled(bucket);
    launch_in_order();
  }
}

void GradSync::stage_and_count(size_t i) {
  stage(i);
  staged_[i] = 1;
  if (--pending_[place_[i].first] == 0) launch_in_order();
}

void GradSync::launch_in_order() {
  while (next_bucket_ < buckets_.size() && pending_[next_bucket_] == 0) launch(next_bucket_++);
}

void GradSync::after_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finalized_) finalize_locked();
  finalized_ = false;
}

void GradSync::finalize_locked() {
  in_backward_ = false;
  finalized_ = true;
  recording_order_ = false;
  backward_ending();
  if (!sync_) {
    reset_step(false);
    backward_ended(false);
    return;
  }
  finalize_synchronized();
}

void GradSync::finalize_synchronized() {
  // Missing: no gradient in this backward nor earlier in the no_sync window
  // (a pipeline stage's chunks, or a split weight-gradient pass, each reach
  // some parameters in one backward and the rest in others).
  const size_t missing = static_cast<size_t>(std::count(used_.begin(), used_.end(), 0));
  // Parameters whose hook did not fire still fill their slot (a .grad
  // accumulated in a no_sync window, or zeros), so every bucket launches and
  // every rank issues the same collectives.
  for (const std::vector<size_t>& bucket : buckets_)
    for (size_t i : bucket)
      if (!staged_[i]) stage_and_count(i);
  at::Tensor status;
  WorkHandle status_work = start_status(status, missing);
  finish_buckets();
  const std::vector<int32_t> global_used = agree(std::move(status_work), status, missing);
  apply(global_used);
  reset_step(true);
  ++iterations_;
  backward_ended(true);
}

WorkHandle GradSync::start_status(at::Tensor& status, size_t missing) {
  std::vector<int32_t> values;
  if (options_.missing == MissingGradients::Forbid) {
    values.push_back(missing > 0 ? 1 : 0);
  } else if (!(options_.reuse_used_map && have_cached_used_)) {
    values = used_;
  } else {
    return nullptr;
  }
  status = at::empty({static_cast<int64_t>(values.size())}, at::kInt);
  std::memcpy(status.data_ptr<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  status = status.to(params_.front().device());
  return status_comm_->all_reduce_async(status, ReduceOp::Sum);
}

std::vector<int32_t> GradSync::agree(WorkHandle status_work, at::Tensor& status, size_t missing) {
  if (!status_work) return cached_used_;
  status_work->wait();
  const at::Tensor host = status.cpu();
  std::vector<int32_t> values(static_cast<size_t>(host.numel()));
  std::memcpy(values.data(), host.data_ptr<int32_t>(), values.size() * sizeof(int32_t));
  if (options_.missing == MissingGradients::Allow) {
    if (options_.reuse_used_map) {
      cached_used_ = values;
      have_cached_used_ = true;
    }
    return values;
  }
  if (values[0] > 0) {
    // Some rank lacks a gradient: every rank knows it from the sum, so every
    // rank joins all_ok and throws the lowest failing rank's message.
    const std::string why = missing_message();
    reset_step(true);
    all_ok(*status_comm_, missing == 0, why);
    MPIACCEL_THROW(options_.owner + ": a rank reported a missing gradient but all_ok passed");
  }
  return std::vector<int32_t>(params_.size(), 1);
}

std::string GradSync::missing_message() const {
  std::string first;
  size_t count = 0;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!used_[i] && count++ == 0) first = names_[i];
  if (count == 0) return "";
  std::string message = "parameter " + first + " received no gradient in this step";
  if (count > 1) message += " (and " + std::to_string(count - 1) + " more)";
  return message + ": " + options_.missing_advice;
}

void GradSync::reset_step(bool end_of_window) {
  std::fill(fired_.begin(), fired_.end(), 0);
  std::fill(staged_.begin(), staged_.end(), 0);
  if (end_of_window) std::fill(used_.begin(), used_.end(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  next_bucket_ = 0;
}

int64_t GradSync::iterations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return iterations_;
}

}  // namespace mpiaccel::detail
