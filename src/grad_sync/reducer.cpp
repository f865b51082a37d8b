// The DDP gradient reducer: GradSync's all-reduce policy (see reducer.hpp).

#include "grad_sync/reducer.hpp"

#include "runtime/trace.hpp"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <cstring>

#include "mpiaccel/error.hpp"
#include "grad_sync/grad_math.hpp"
#include "runtime/torch_compat.hpp"

namespace mpiaccel::detail {
namespace {

std::string order_bytes(const std::vector<size_t>& order) {
  std::string bytes(order.size() * sizeof(int64_t), '\0');
  for (size_t k = 0; k < order.size(); ++k) {
    const int64_t v = static_cast<int64_t>(order[k]);
    std::memcpy(bytes.data() + k * sizeof v, &v, sizeof v);
  }
  return bytes;
}

std::vector<size_t> order_from_bytes(const std::string& bytes, size_t expected) {
  MPIACCEL_CHECK(bytes.size() == expected * sizeof(int64_t),
                 "DDP bucket rebuild: rank 0 sent an order of " +
                     std::to_string(bytes.size() / sizeof(int64_t)) + " gradients, this rank has " +
                     std::to_string(expected));
  std::vector<size_t> order(expected);
  for (size_t k = 0; k < expected; ++k) {
    int64_t v;
    std::memcpy(&v, bytes.data() + k * sizeof v, sizeof v);
    order[k] = static_cast<size_t>(v);
  }
  return order;
}

constexpr int64_t kSharedAlignBytes = 64;

int64_t align_up(int64_t bytes) {
  return (bytes + kSharedAlignBytes - 1) / kSharedAlignBytes * kSharedAlignBytes;
}

// Hands out consecutive, zeroed tensors of a node-shared allocation, each
// with its own storage (so is_alias_of tells buckets apart), or of ordinary
// memory when there is none.
class SharedCarver {
 public:
  explicit SharedCarver(at::Tensor region) : region_(std::move(region)) {}

  at::Tensor carve(int64_t numel, const at::TensorOptions& options) {
    if (!region_.defined()) return at::zeros({numel}, options);
    const int64_t bytes = numel * static_cast<int64_t>(options.dtype().itemsize());
    MPIACCEL_CHECK(used_ + bytes <= region_.numel(), "DDP reducer: shared bucket memory overrun");
    void* data = static_cast<char*>(region_.data_ptr()) + used_;
    used_ += align_up(bytes);
    auto tensor = at::from_blob(data, {numel}, [keep = region_](void*) {}, options);
    return tensor.zero_();
  }

 private:
  at::Tensor region_;
  int64_t used_ = 0;
};

}  // namespace

namespace {

GradSyncOptions reducer_sync_options(const ReducerOptions& options) {
  return {"DDP",
          options.find_unused_parameters ? MissingGradients::Allow : MissingGradients::Forbid,
          options.static_graph,
          "set [ddp] find_unused_parameters = true if parts of the model are legitimately unused "
          "in some steps or on some ranks, or make the loss depend on every parameter"};
}

}  // namespace

Reducer::Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                 std::shared_ptr<Communicator> comm, ReducerOptions options)
    : GradSync(std::move(params), std::move(names), comm, reducer_sync_options(options)),
      comm_(std::move(comm)),
      options_(options),
      hook_(options_.hook ? options_.hook : make_all_reduce_hook()) {
  MPIACCEL_CHECK(options_.bucket_bytes > 0, "Reducer: bucket_bytes must be set (> 0)");
  for (const at::Tensor& p : grad_params()) param_impls_.insert(p.unsafeGetTensorImpl());
  infos_ = grad_infos(grad_params());
  untouched_.assign(infos_.size(), 0);
  hook_->attach(grad_params(), grad_names(), *comm_);
  build_buckets(assign_buckets(infos_, reverse_order(infos_.size()), options_.first_bucket_bytes,
                               options_.bucket_bytes));
  start_hooks();
}

Reducer::~Reducer() {
  stop_hooks();
  for (const Bucket& bucket : buckets_) wait_at_shutdown(bucket.work.work, "DDP");
}

void Reducer::build_buckets(const std::vector<std::vector<size_t>>& assignment) {
  const std::vector<at::Tensor>& params = grad_params();
  std::vector<Bucket> buckets(assignment.size());
  // The all-reduced tensors (each bucket's wire copy, else the bucket itself)
  // go into node-shared memory when the communicator offers it: their
  // all-reduce then runs in place through it (docs/comm.md).
  const auto wire_dtype_of = [&](const at::Tensor& first) {
    return hook_->wire_dtype_for(first.scalar_type()).value_or(first.scalar_type());
  };
  std::vector<int64_t> numels(assignment.size(), 0);
  int64_t shared_bytes = 0;
  for (size_t b = 0; b < assignment.size(); ++b) {
    for (size_t i : assignment[b]) numels[b] += params[i].numel();
    shared_bytes += align_up(numels[b] * c10::elementSize(wire_dtype_of(params[assignment[b].front()])));
  }
  const bool on_host = params.front().device().is_cpu();
  SharedCarver shared(on_host ? comm_->allocate_shared(shared_bytes) : at::Tensor());
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = buckets[b];
    const int64_t numel = numels[b];
    const at::Tensor& first = params[assignment[b].front()];
    const auto options = first.options().requires_grad(false);
    const auto wire = hook_->wire_dtype_for(first.scalar_type());
    GradBucket& grads = bucket.grads;
    // Allocated once: a fresh bucket-sized tensor every step would cost an
    // allocation and its page faults on the hot path.
    if (wire) {
      grads.buffer = at::zeros({numel}, options);
      grads.wire = shared.carve(numel, options.dtype(*wire));
    } else {
      grads.buffer = shared.carve(numel, options);
    }
    grads.index = b;
    grads.last = b + 1 == assignment.size();
    grads.params = assignment[b];
    grads.comm = comm_.get();
    // Views made below the autograd view layer: plain aliases of the bucket
    // memory, not autograd views, so LibTorch's Optimizer::zero_grad() (which
    // calls grad.detach_()) works on them when they are param.grad.
    at::AutoDispatchBelowADInplaceOrView plain_views;
    int64_t offset = 0;
    for (size_t i : assignment[b]) {
      grads.gradients.push_back(grads.buffer.narrow(0, offset, params[i].numel()).view(params[i].sizes()));
      offset += params[i].numel();
    }
  }
  buckets_ = std::move(buckets);
  set_buckets(assignment);
  if (options_.gradient_as_bucket_view)
    for (size_t i = 0; i < params.size(); ++i) bind_to_view(i);
}

const at::Tensor& Reducer::view_of(size_t i) const {
  const auto [b, s] = place_of(i);
  return buckets_[b].grads.gradients[s];
}

void Reducer::bind_to_view(size_t i) {
  at::Tensor& grad = grad_params()[i].mutable_grad();
  const at::Tensor& view = view_of(i);
  if (!grad.defined() || grad.is_alias_of(view)) return;
  view.copy_(grad);
  grad = view;
}

void Reducer::on_unsynced_grad(size_t i) {
  // Accumulate locally; with bucket views, inside the bucket already.
  if (options_.gradient_as_bucket_view) bind_to_view(i);
}

void Reducer::stage(size_t i) {
  const at::Tensor& view = view_of(i);
  at::Tensor& grad = grad_params()[i].mutable_grad();
  if (!grad.defined()) {
    view.zero_();  // used on no rank here: contributes nothing
  } else if (!options_.gradient_as_bucket_view || !grad.is_alias_of(view)) {
    view.copy_(grad);
    if (options_.gradient_as_bucket_view) grad = view;
  }
}

void Reducer::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  bucket.launched = Clock::now();
  bucket.work = hook_->launch(bucket.grads);
}

void Reducer::backward_ending() { backward_end_ = Clock::now(); }

void Reducer::finish_buckets() {
  last_works_.clear();
  auto& tracer = Tracer::instance();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    // On a GPU: the compute stream waits, the host goes on.
    if (bucket.work.work) bucket.work.work->wait();
    if (bucket.work.finish) bucket.work.finish();
    const WorkHandle& work = bucket.work.work;
    if (tracer.enabled()) trace_work(hook_->name() + " bucket " + std::to_string(b), work);
    if (work) last_works_.emplace_back(bucket.launched, work);
    bucket.work = HookWork{};
  }
}

void Reducer::apply(const std::vector<int32_t>& global_used) {
  const std::vector<at::Tensor>& params = grad_params();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor& grad = params[i].mutable_grad();
    if (global_used[i] == 0) {
      // No rank used it: leave .grad alone, unless it was zeroed for a
      // LibTorch whose zero_grad sets it to undefined.
      if (kZeroGradSetsToNone && untouched_[i]) grad = at::Tensor();
      continue;
    }
    untouched_[i] = 0;
    const at::Tensor& view = view_of(i);
    if (options_.gradient_as_bucket_view) {
      if (!grad.defined() || !grad.is_alias_of(view)) grad = view;
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      grad = view.clone();
    }
  }
}

void Reducer::backward_ended(bool synchronized) {
  if (synchronized && !rebuilt_) rebuild_buckets();
}

void Reducer::rebuild_buckets() {
  rebuilt_ = true;
  // The first backward's ready order, then the parameters that did not fire
  // in it, in their current launch order.
  const size_t n = grad_params().size();
  std::vector<char> listed(n, 0);
  std::vector<size_t> order;
  for (size_t i : observed_order())
    if (!listed[i]) {
      listed[i] = 1;
      order.push_back(i);
    }
  for (const std::vector<size_t>& bucket : bucket_assignment())
    for (size_t i : bucket)
      if (!listed[i]) {
        listed[i] = 1;
        order.push_back(i);
      }
  // Ready order can differ between ranks (different branches, thread timing):
  // rank 0's decides, so every rank builds the same buckets.
  order = order_from_bytes(comm_->broadcast_bytes(order_bytes(order), 0), n);
  auto assignment = assign_buckets(infos_, order, options_.first_bucket_bytes, options_.bucket_bytes);
  if (assignment == bucket_assignment()) return;
  // With bucket views, param.grad points into the old buckets: build_buckets
  // copies it into the new views and rebinds.
  build_buckets(assignment);
}

void Reducer::zero_grad() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::fill(untouched_.begin(), untouched_.end(), 1);
  // As this LibTorch's Optimizer::zero_grad(): on 2.x the gradients become
  // undefined, so the next backward's AccumulateGrad takes each new gradient
  // as it is and stage() copies it into its bucket view (two passes over the
  // bytes) instead of adding it to a zeroed view (a memset, then three).
  reset_local_grads(grad_params());
}

bool Reducer::manages(const at::Tensor& param) const {
  return param_impls_.count(param.unsafeGetTensorImpl()) != 0;
}

std::vector<int64_t> Reducer::bucket_sizes() const {
  std::vector<int64_t> out;
  for (const Bucket& bucket : buckets_)
    out.push_back(bucket.grads.buffer.numel() * bucket.grads.buffer.element_size());
  return out;
}

int64_t Reducer::reduced_bytes_per_step() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) {
    const at::Tensor& sent = bucket.grads.wire.defined() ? bucket.grads.wire : bucket.grads.buffer;
    bytes += sent.numel() * sent.element_size();
  }
  return bytes;
}

int64_t Reducer::wire_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_)
    if (bucket.grads.wire.defined()) bytes += bucket.grads.wire.numel() * bucket.grads.wire.element_size();
  return bytes;
}

bool Reducer::buckets_rebuilt() const { return rebuilt_; }

std::vector<Reducer::BucketTiming> Reducer::last_bucket_timings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<BucketTiming> timings;
  for (const auto& [launched, work] : last_works_) {
    BucketTiming timing;
    timing.launched = launched;
    if (work->test()) {
      timing.started = work->started_at();
      timing.finished = work->finished_at();
    }
    timings.push_back(timing);
  }
  return timings;
}

Reducer::Clock::time_point Reducer::last_backward_end() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return backward_end_;
}

at::Tensor Reducer::bucket_view(size_t index) const {
  MPIACCEL_CHECK(index < grad_params().size(), "DDP reducer: no parameter " + std::to_string(index));
  return view_of(index);
}

}  // namespace mpiaccel::detail
