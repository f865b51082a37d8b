// ZeRO-2's bucketed reduce-scatter of gradients (see grad_shard_reducer.hpp).

#include "zero/grad_shard_reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel::detail {

GradShardReducer::GradShardReducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                                   std::vector<ParamShard> shards,
                                   std::shared_ptr<Communicator> comm, int64_t first_bucket_bytes,
                                   int64_t bucket_bytes, std::optional<at::ScalarType> reduce_dtype)
    : params_(std::move(params)),
      names_(std::move(names)),
      shards_(std::move(shards)),
      comm_(std::move(comm)),
      reduce_dtype_(reduce_dtype) {
  MPIACCEL_CHECK(comm_, "ZeRO-2 reducer: no communicator");
  MPIACCEL_CHECK(names_.size() == params_.size() && shards_.size() == params_.size(),
                 "ZeRO-2 reducer: one name and one shard per parameter needed");
  MPIACCEL_CHECK(!params_.empty(), "ZeRO-2: the model has no parameter that requires grad");
  const size_t n = params_.size();
  const int rank = comm_->rank(), world = comm_->size();
  std::vector<GradInfo> infos(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params_[i];
    MPIACCEL_CHECK(p.requires_grad() && p.is_leaf(),
                   "ZeRO-2: parameter " + names_[i] + " is not a leaf that requires grad");
    infos[i] = GradInfo{p.scalar_type(), p.device(), p.numel() * p.element_size()};
  }
  const GradientDivision division = gradient_division(world, reduce_dtype_);
  pre_scale_ = at::scalar_tensor(division.before, at::kDouble);
  if (division.after != 1.0) post_scale_ = at::scalar_tensor(division.after, at::kDouble);
  fired_.assign(n, 0);
  ready_.assign(n, 0);

  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
  const auto assignment =
      assign_buckets(infos, order, std::min(first_bucket_bytes, bucket_bytes), bucket_bytes);
  locator_.assign(n, {0, 0});
  shard_grads_.resize(n);
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket bucket;
    bucket.params = assignment[b];
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const size_t i = bucket.params[s];
      bucket.offsets.push_back(bucket.block);
      bucket.block += shards_[i].padded_numel();
      locator_[i] = {b, s};
    }
    const at::Tensor& first = params_[bucket.params.front()];
    bucket.output = at::zeros({bucket.block}, first.options().requires_grad(false));
    // Plain aliases (no autograd view), so Optimizer::zero_grad's detach_() works on them.
    at::AutoDispatchBelowADInplaceOrView plain_views;
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const size_t i = bucket.params[s];
      shard_grads_[i] = bucket.output.narrow(0, bucket.offsets[s], shards_[i].numel(rank))
                            .view(shard_shape(params_[i], shards_[i], rank));
    }
    bucket.pending = bucket.params.size();
    buckets_.push_back(std::move(bucket));
  }

  hooks_ = std::make_unique<GradReadyHooks>(params_, names_, "ZeRO-2",
                                            [this](size_t i) { on_grad_ready(i); });
}

GradShardReducer::~GradShardReducer() {
  hooks_.reset();
  for (Bucket& bucket : buckets_) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (const std::exception& e) {
      log_error(std::string("ZeRO-2: a reduce_scatter failed during shutdown: ") + e.what());
    }
  }
}

void GradShardReducer::set_gradient_sync(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  MPIACCEL_CHECK(!in_backward_, "ZeRO: gradient sync cannot change during a backward pass");
  sync_ = enabled;
}

bool GradShardReducer::gradient_sync() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sync_;
}

void GradShardReducer::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) {
    in_backward_ = true;
    finalized_ = false;
    torch::autograd::Engine::get_default_engine().queue_callback([this] {
      std::lock_guard<std::mutex> inner(mutex_);
      finalize_locked();
    });
  }
  MPIACCEL_CHECK(!fired_[i],
                 "ZeRO: parameter " + names_[i] +
                     " received its gradient twice in one backward (reentrant activation "
                     "checkpointing or a parameter shared between modules?); ZeRO reduces each "
                     "gradient once per backward");
  fired_[i] = 1;
  if (sync_) mark_ready(i);
}

void GradShardReducer::mark_ready(size_t i) {
  const auto [b, s] = locator_[i];
  Bucket& bucket = buckets_[b];
  const int world = comm_->size();
  if (!bucket.input.defined())
    // Zeros: the padding rows are reduced too, and must not be NaN garbage.
    bucket.input = at::zeros({bucket.block * world},
                             bucket.output.options().dtype(reduce_dtype_.value_or(bucket.output.scalar_type())));
  at::Tensor& grad = params_[i].mutable_grad();
  if (grad.defined()) {
    const at::Tensor flat = grad.detach().contiguous();
    for (int r = 0; r < world; ++r) {
      const int64_t count = shards_[i].numel(r);
      if (count == 0) continue;
      at::Tensor slot = bucket.input.narrow(0, r * bucket.block + bucket.offsets[s], count);
      const at::Tensor rows = flat_rows(flat, shards_[i], r);
      // Dividing during the copy costs no extra pass and keeps fp16 sums in range.
      if (world > 1) at::mul_out(slot, rows, pre_scale_);
      else slot.copy_(rows);
    }
    // The full gradient is not needed any more: this rank keeps only its rows.
    grad = at::Tensor();
  }
  ready_[i] = 1;
  if (--bucket.pending == 0) launch_ready_buckets();
}

void GradShardReducer::launch_ready_buckets() {
  // Strictly in index order, so every rank queues the same collectives.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_++];
    at::Tensor target = bucket.output;
    if (accumulate_ || bucket.input.scalar_type() != bucket.output.scalar_type()) {
      bucket.scratch = at::empty({bucket.block}, bucket.input.options());
      target = bucket.scratch;
    }
    bucket.work = comm_->reduce_scatter_async(target, bucket.input, ReduceOp::Sum);
  }
}

void GradShardReducer::after_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finalized_) finalize_locked();
  finalized_ = false;
}

std::string GradShardReducer::missing_message() const {
  std::string first;
  size_t count = 0;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!fired_[i] && count++ == 0) first = names_[i];
  if (count == 0) return "";
  std::string message = "ZeRO: parameter " + first + " received no gradient in this step";
  if (count > 1) message += " (and " + std::to_string(count - 1) + " more)";
  return message +
         ": ZeRO reduces every gradient in every step; make the loss depend on every parameter, "
         "or freeze (requires_grad = false) the parameters a step does not use";
}

void GradShardReducer::finalize_locked() {
  in_backward_ = false;
  finalized_ = true;
  if (!sync_) {
    std::fill(fired_.begin(), fired_.end(), 0);
    return;
  }
  // Parameters whose hook did not fire still fill their slot (a .grad
  // accumulated in a no_sync window, or zeros) so every bucket launches.
  size_t missing = 0;
  for (size_t i = 0; i < params_.size(); ++i) missing += fired_[i] ? 0 : 1;
  for (const Bucket& bucket : buckets_)
    for (size_t i : std::vector<size_t>(bucket.params))
      if (!ready_[i]) mark_ready(i);
  at::Tensor status = at::full({1}, missing > 0 ? 1 : 0, at::kInt).to(params_.front().device());
  WorkHandle status_work = comm_->all_reduce_async(status, ReduceOp::Sum);

  for (Bucket& bucket : buckets_) {
    bucket.work->wait();
    bucket.work.reset();
    if (bucket.scratch.defined()) {
      at::Tensor sum = bucket.scratch.to(bucket.output.scalar_type());
      if (post_scale_.defined()) sum.mul_(post_scale_);
      if (accumulate_) bucket.output.add_(sum);
      else bucket.output.copy_(sum);
    } else if (post_scale_.defined()) {
      bucket.output.mul_(post_scale_);
    }
    bucket.scratch = at::Tensor();
    bucket.input = at::Tensor();
  }
  status_work->wait();
  const bool any_missing = status.cpu().item<int32_t>() > 0;
  const std::string why = missing_message();
  reset_step();
  if (any_missing) {
    // Every rank knows from the sum: all join all_ok and throw the lowest failing rank's reason.
    all_ok(*comm_, missing == 0, why);
    MPIACCEL_THROW("ZeRO: a rank reported a missing gradient but all_ok passed");  // not reached
  }
  accumulate_ = true;
  ++iterations_;
}

void GradShardReducer::reset_step() {
  std::fill(fired_.begin(), fired_.end(), 0);
  std::fill(ready_.begin(), ready_.end(), 0);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.work.reset();
  }
  next_bucket_ = 0;
}

void GradShardReducer::zero_grad() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Bucket& bucket : buckets_) bucket.output.zero_();
  for (at::Tensor& p : params_) {
    at::Tensor& grad = p.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
  accumulate_ = false;
}

int64_t GradShardReducer::shard_grad_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) bytes += bucket.output.numel() * bucket.output.element_size();
  return bytes;
}

int64_t GradShardReducer::full_grad_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& p : params_)
    if (p.grad().defined()) bytes += p.grad().numel() * p.grad().element_size();
  return bytes;
}

std::vector<std::vector<size_t>> GradShardReducer::bucket_assignment() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& bucket : buckets_) out.push_back(bucket.params);
  return out;
}

int64_t GradShardReducer::reduced_bytes_per_step() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) {
    const auto dtype = reduce_dtype_.value_or(bucket.output.scalar_type());
    bytes += bucket.block * comm_->size() * static_cast<int64_t>(c10::elementSize(dtype));
  }
  return bytes;
}

int64_t GradShardReducer::iterations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return iterations_;
}

}  // namespace mpiaccel::detail
