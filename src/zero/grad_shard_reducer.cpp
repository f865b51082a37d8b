// ZeRO-2's bucketed reduce-scatter of gradients (see grad_shard_reducer.hpp).

#include "zero/grad_shard_reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"
#include "grad_sync/bucket_layout.hpp"

namespace mpiaccel::detail {

namespace {

GradSyncOptions shard_reducer_sync_options() {
  return {"ZeRO", MissingGradients::Forbid, false,
          "ZeRO reduces every gradient in every step; make the loss depend on every parameter, "
          "or freeze (requires_grad = false) the parameters a step does not use"};
}

}  // namespace

GradShardReducer::GradShardReducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                                   std::vector<ParamShard> shards,
                                   std::shared_ptr<Communicator> comm, int64_t first_bucket_bytes,
                                   int64_t bucket_bytes, std::optional<at::ScalarType> reduce_dtype)
    : GradSync(std::move(params), std::move(names), comm, shard_reducer_sync_options()),
      shards_(std::move(shards)),
      comm_(std::move(comm)),
      reduce_dtype_(reduce_dtype) {
  const std::vector<at::Tensor>& ps = grad_params();
  MPIACCEL_CHECK(shards_.size() == ps.size(), "ZeRO-2 reducer: one shard per parameter needed");
  const GradientDivision division = gradient_division(comm_->size(), reduce_dtype_);
  pre_scale_ = at::scalar_tensor(division.before, at::kDouble);
  if (division.after != 1.0) post_scale_ = at::scalar_tensor(division.after, at::kDouble);
  set_buckets(assign_buckets(grad_infos(ps), reverse_order(ps.size()), first_bucket_bytes, bucket_bytes));
  build_buckets();
  start_hooks();
}

void GradShardReducer::build_buckets() {
  const std::vector<at::Tensor>& params = grad_params();
  const int rank = comm_->rank();
  shard_grads_.resize(params.size());
  for (const std::vector<size_t>& members : bucket_assignment()) {
    Bucket bucket;
    for (size_t i : members) {
      bucket.offsets.push_back(bucket.block);
      bucket.block += shards_[i].padded_numel();
    }
    bucket.output = at::zeros({bucket.block}, params[members.front()].options().requires_grad(false));
    // Plain aliases (no autograd view), so Optimizer::zero_grad's detach_() works on them.
    at::AutoDispatchBelowADInplaceOrView plain_views;
    for (size_t s = 0; s < members.size(); ++s) {
      const size_t i = members[s];
      shard_grads_[i] = bucket.output.narrow(0, bucket.offsets[s], shards_[i].numel(rank))
                            .view(shard_shape(params[i], shards_[i], rank));
    }
    buckets_.push_back(std::move(bucket));
  }
}

GradShardReducer::~GradShardReducer() {
  stop_hooks();
  for (const Bucket& bucket : buckets_) wait_at_shutdown(bucket.work, "ZeRO");
}

void GradShardReducer::stage(size_t i) {
  const auto [b, s] = place_of(i);
  Bucket& bucket = buckets_[b];
  const int world = comm_->size();
  if (!bucket.input.defined())
    // Zeros: the padding rows are reduced too, and must not be NaN garbage.
    bucket.input = at::zeros({bucket.block * world},
                             bucket.output.options().dtype(reduce_dtype_.value_or(bucket.output.scalar_type())));
  at::Tensor& grad = grad_params()[i].mutable_grad();
  if (!grad.defined()) return;
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

void GradShardReducer::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  at::Tensor target = bucket.output;
  if (accumulate_ || bucket.input.scalar_type() != bucket.output.scalar_type()) {
    bucket.scratch = at::empty({bucket.block}, bucket.input.options());
    target = bucket.scratch;
  }
  bucket.work = comm_->reduce_scatter_async(target, bucket.input, ReduceOp::Sum);
}

void GradShardReducer::finish_buckets() {
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
}

void GradShardReducer::apply(const std::vector<int32_t>& /*global_used*/) {
  // The reduce-scatters wrote the shard gradients; from now on they accumulate.
  accumulate_ = true;
}

void GradShardReducer::zero_grad() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Bucket& bucket : buckets_) bucket.output.zero_();
  for (const at::Tensor& p : grad_params()) {
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
  for (const at::Tensor& p : grad_params())
    if (p.grad().defined()) bytes += p.grad().numel() * p.grad().element_size();
  return bytes;
}

int64_t GradShardReducer::reduced_bytes_per_step() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) {
    const auto dtype = reduce_dtype_.value_or(bucket.output.scalar_type());
    bytes += bucket.block * comm_->size() * static_cast<int64_t>(c10::elementSize(dtype));
  }
  return bytes;
}

}  // namespace mpiaccel::detail
