// The DDP gradient reducer (see reducer.hpp for the design).

#include "ddp/reducer.hpp"

#include "runtime/trace.hpp"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <cstring>

#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/precision.hpp"

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

Reducer::Reducer(std::vector<at::Tensor> params, std::vector<std::string> names,
                 std::shared_ptr<Communicator> comm, ReducerOptions options)
    : params_(std::move(params)),
      names_(std::move(names)),
      comm_(std::move(comm)),
      options_(options) {
  MPIACCEL_CHECK(comm_, "DDP reducer: no communicator");
  MPIACCEL_CHECK(names_.size() == params_.size(), "DDP reducer: one name per parameter needed");
  MPIACCEL_CHECK(!params_.empty(), "DDP reducer: the model has no parameter that requires grad");
  const size_t n = params_.size();
  for (const at::Tensor& p : params_) param_impls_.insert(p.unsafeGetTensorImpl());
  infos_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& p = params_[i];
    MPIACCEL_CHECK(p.requires_grad() && p.is_leaf(),
                   "DDP reducer: parameter " + names_[i] + " is not a leaf that requires grad");
    infos_[i] = GradInfo{p.scalar_type(), p.device(), p.numel() * p.element_size()};
  }
  const GradientDivision division = gradient_division(comm_->size(), options_.reduce_dtype);
  // Full-width wire: the all-reduce averages as it sums (one pass fewer over
  // every gradient). A 16-bit wire divides before and after instead, so the
  // sum cannot overflow (NOTES.md).
  if (division.split) {
    bucket_op_ = ReduceOp::Sum;
    pre_scale_ = at::scalar_tensor(division.before, at::kDouble);
    if (division.after != 1.0) post_scale_ = at::scalar_tensor(division.after, at::kDouble);
  }
  fired_.assign(n, 0);
  ready_.assign(n, 0);
  used_.assign(n, 0);

  // Reverse parameter order: backward produces the last layers' gradients first.
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = n - 1 - k;
  build_buckets(assign_buckets(infos_, order,
                               std::min(options_.first_bucket_bytes, options_.bucket_bytes),
                               options_.bucket_bytes));

  hooks_ = std::make_unique<GradReadyHooks>(params_, names_, "DDP reducer",
                                            [this](size_t i) { on_grad_ready(i); });
}

Reducer::~Reducer() {
  hooks_.reset();
  for (Bucket& bucket : buckets_) {
    if (!bucket.work) continue;
    try {
      bucket.work->wait();
    } catch (const std::exception& e) {
      log_error(std::string("DDP reducer: an all_reduce failed during shutdown: ") + e.what());
    }
  }
}

void Reducer::build_buckets(const std::vector<std::vector<size_t>>& assignment) {
  std::vector<Bucket> buckets(assignment.size());
  locator_.assign(params_.size(), {0, 0});
  // The all-reduced tensors (each bucket's wire copy, else the bucket itself)
  // go into node-shared memory when the communicator offers it: their
  // all-reduce then runs in place through it (docs/comm.md).
  const auto wire_dtype_of = [&](const at::Tensor& first) {
    return options_.reduce_dtype ? *options_.reduce_dtype : first.scalar_type();
  };
  std::vector<int64_t> numels(assignment.size(), 0);
  int64_t shared_bytes = 0;
  for (size_t b = 0; b < assignment.size(); ++b) {
    for (size_t i : assignment[b]) numels[b] += params_[i].numel();
    shared_bytes += align_up(numels[b] * c10::elementSize(wire_dtype_of(params_[assignment[b].front()])));
  }
  const bool on_host = params_.front().device().is_cpu();
  SharedCarver shared(on_host ? comm_->allocate_shared(shared_bytes) : at::Tensor());
  for (size_t b = 0; b < assignment.size(); ++b) {
    Bucket& bucket = buckets[b];
    bucket.params = assignment[b];
    const int64_t numel = numels[b];
    const at::Tensor& first = params_[bucket.params.front()];
    const auto options = first.options().requires_grad(false);
    const bool cast = options_.reduce_dtype && *options_.reduce_dtype != first.scalar_type();
    // Allocated once: a fresh bucket-sized tensor every step would cost an
    // allocation and its page faults on the hot path.
    if (cast) {
      bucket.flat = at::zeros({numel}, options);
      bucket.wire = shared.carve(numel, options.dtype(*options_.reduce_dtype));
    } else {
      bucket.flat = shared.carve(numel, options);
    }
    // Views made below the autograd view layer: plain aliases of the bucket
    // memory, not autograd views, so LibTorch's Optimizer::zero_grad() (which
    // calls grad.detach_()) works on them when they are param.grad.
    at::AutoDispatchBelowADInplaceOrView plain_views;
    int64_t offset = 0;
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const size_t i = bucket.params[s];
      bucket.views.push_back(bucket.flat.narrow(0, offset, params_[i].numel()).view(params_[i].sizes()));
      offset += params_[i].numel();
      locator_[i] = {b, s};
    }
    bucket.pending = bucket.params.size();
  }
  buckets_ = std::move(buckets);
  next_bucket_ = 0;
  if (options_.gradient_as_bucket_view)
    for (size_t i = 0; i < params_.size(); ++i) bind_to_view(i);
}

void Reducer::bind_to_view(size_t i) {
  at::Tensor& grad = params_[i].mutable_grad();
  const at::Tensor& view = buckets_[locator_[i].first].views[locator_[i].second];
  if (!grad.defined() || grad.is_alias_of(view)) return;
  view.copy_(grad);
  grad = view;
}

void Reducer::set_gradient_sync(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  MPIACCEL_CHECK(!in_backward_, "DDP: gradient sync cannot change during a backward pass");
  sync_ = enabled;
}

bool Reducer::gradient_sync() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sync_;
}

void Reducer::on_grad_ready(size_t i) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) {
    in_backward_ = true;
    finalized_ = false;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { finalize_backward(); });
  }
  MPIACCEL_CHECK(!fired_[i],
                 "DDP: parameter " + names_[i] +
                     " received its gradient twice in one backward (reentrant activation "
                     "checkpointing or a parameter shared between modules?); DDP reduces each "
                     "gradient once per backward");
  fired_[i] = 1;
  used_[i] = 1;
  if (recording_order_) observed_order_.push_back(i);
  if (!sync_) {
    // Accumulate locally; with bucket views, inside the bucket already.
    if (options_.gradient_as_bucket_view) bind_to_view(i);
    return;
  }
  mark_ready(i);
}

void Reducer::mark_ready(size_t i) {
  const auto [b, s] = locator_[i];
  Bucket& bucket = buckets_[b];
  const at::Tensor& view = bucket.views[s];
  at::Tensor& grad = params_[i].mutable_grad();
  const bool divide = pre_scale_.defined();
  if (!grad.defined()) {
    view.zero_();  // used on no rank here: contributes nothing
  } else if (options_.gradient_as_bucket_view && grad.is_alias_of(view)) {
    if (divide) view.mul_(pre_scale_);
  } else {
    if (divide) at::mul_out(const_cast<at::Tensor&>(view), grad, pre_scale_);
    else view.copy_(grad);
    if (options_.gradient_as_bucket_view) grad = view;
  }
  ready_[i] = 1;
  if (--bucket.pending == 0) launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  // Strictly in index order: a bucket that fills early waits for the ones
  // before it, so every rank queues the same all-reduce sequence.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& bucket = buckets_[next_bucket_++];
    bucket.timing = BucketTiming{};
    bucket.timing.launched = Clock::now();
    if (bucket.wire.defined()) bucket.wire.copy_(bucket.flat);
    bucket.work = comm_->all_reduce_async(bucket.wire.defined() ? bucket.wire : bucket.flat, bucket_op_);
  }
}

void Reducer::finalize_backward() {
  std::unique_lock<std::mutex> lock(mutex_);
  finalize_locked(lock);
}

void Reducer::after_backward() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!finalized_) finalize_locked(lock);
  finalized_ = false;
}

std::string Reducer::missing_message() const {
  std::string first;
  size_t count = 0;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!fired_[i] && count++ == 0) first = names_[i];
  if (count == 0) return "";
  std::string message = "parameter " + first + " received no gradient in this step";
  if (count > 1) message += " (and " + std::to_string(count - 1) + " more)";
  return message +
         ": set [ddp] find_unused_parameters = true if parts of the model are legitimately unused "
         "in some steps or on some ranks, or make the loss depend on every parameter";
}

void Reducer::finalize_locked(std::unique_lock<std::mutex>& /*lock*/) {
  backward_end_ = Clock::now();
  in_backward_ = false;
  finalized_ = true;
  recording_order_ = false;
  if (!sync_) {
    std::fill(fired_.begin(), fired_.end(), 0);
    return;
  }

  // Parameters whose hook did not fire still fill their slot (their .grad
  // accumulated earlier in a no_sync window, or zeros) so every bucket
  // launches and every rank issues the same collectives.
  size_t missing = 0;
  for (const Bucket& bucket : buckets_)
    for (size_t i : bucket.params) missing += fired_[i] ? 0 : 1;
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t i : std::vector<size_t>(buckets_[b].params))
      if (!ready_[i]) mark_ready(i);

  const bool find_unused = options_.find_unused_parameters;
  const bool reduce_used = find_unused && !(options_.static_graph && have_global_used_);
  std::vector<int32_t> status;
  if (!find_unused) status.push_back(missing > 0 ? 1 : 0);
  else if (reduce_used) status = used_;
  at::Tensor status_tensor;
  WorkHandle status_work;
  if (!status.empty()) {
    status_tensor = at::empty({static_cast<int64_t>(status.size())}, at::kInt);
    std::memcpy(status_tensor.data_ptr<int32_t>(), status.data(), status.size() * sizeof(int32_t));
    status_tensor = status_tensor.to(params_.front().device());
    status_work = comm_->all_reduce_async(status_tensor, ReduceOp::Sum);
  }

  last_timings_.clear();
  auto& tracer = Tracer::instance();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.work->wait();
    bucket.timing.started = bucket.work->started_at();
    bucket.timing.finished = bucket.work->finished_at();
    bucket.work.reset();
    if (bucket.wire.defined()) bucket.flat.copy_(bucket.wire);
    if (post_scale_.defined()) bucket.flat.mul_(post_scale_);
    last_timings_.push_back(bucket.timing);
    if (tracer.enabled())
      tracer.record("all_reduce bucket " + std::to_string(b), TraceLane::Communication,
                    bucket.timing.started, bucket.timing.finished);
  }
  if (status_work) {
    status_work->wait();
    status_tensor = status_tensor.cpu();
    std::memcpy(status.data(), status_tensor.data_ptr<int32_t>(), status.size() * sizeof(int32_t));
  }

  if (!find_unused && status[0] > 0) {
    // Some rank lacks a gradient: every rank knows it from the status sum, so
    // every rank joins all_ok and throws the lowest failing rank's message.
    const std::string why = missing_message();
    reset_step(true);
    all_ok(*comm_, missing == 0, why);
    MPIACCEL_THROW("DDP: a rank reported a missing gradient but all_ok passed");  // not reached
  }
  std::vector<int32_t> global_used;
  if (find_unused) {
    if (reduce_used) {
      global_used = status;
      if (options_.static_graph) {
        global_used_ = status;
        have_global_used_ = true;
      }
    } else {
      global_used = global_used_;
    }
  }

  for (Bucket& bucket : buckets_)
    for (size_t s = 0; s < bucket.params.size(); ++s) {
      const size_t i = bucket.params[s];
      if (find_unused && global_used[i] == 0) continue;  // no rank used it: leave .grad alone
      at::Tensor& grad = params_[i].mutable_grad();
      const at::Tensor& view = bucket.views[s];
      if (options_.gradient_as_bucket_view) {
        if (!grad.defined() || !grad.is_alias_of(view)) grad = view;
      } else if (grad.defined()) {
        grad.copy_(view);
      } else {
        grad = view.clone();
      }
    }
  reset_step(true);
  ++iterations_;
  if (!rebuilt_) rebuild_buckets();
}

void Reducer::reset_step(bool end_of_window) {
  std::fill(fired_.begin(), fired_.end(), 0);
  std::fill(ready_.begin(), ready_.end(), 0);
  if (end_of_window) std::fill(used_.begin(), used_.end(), 0);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.params.size();
    bucket.work.reset();
  }
  next_bucket_ = 0;
}

void Reducer::rebuild_buckets() {
  rebuilt_ = true;
  // The first backward's ready order, then the parameters that did not fire
  // in it, in their current launch order.
  std::vector<char> listed(params_.size(), 0);
  std::vector<size_t> order;
  for (size_t i : observed_order_)
    if (!listed[i]) {
      listed[i] = 1;
      order.push_back(i);
    }
  for (const Bucket& bucket : buckets_)
    for (size_t i : bucket.params)
      if (!listed[i]) {
        listed[i] = 1;
        order.push_back(i);
      }
  // Ready order can differ between ranks (different branches, thread timing):
  // rank 0's decides, so every rank builds the same buckets.
  order = order_from_bytes(comm_->broadcast_bytes(order_bytes(order), 0), params_.size());
  auto assignment = assign_buckets(infos_, order,
                                   std::min(options_.first_bucket_bytes, options_.bucket_bytes),
                                   options_.bucket_bytes);
  if (assignment == bucket_assignment()) return;
  // With bucket views, param.grad points into the old buckets: build_buckets
  // copies it into the new views and rebinds.
  build_buckets(assignment);
}

void Reducer::zero_grad() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (at::Tensor& p : params_) {
    const at::Tensor& grad = p.grad();
    if (grad.defined()) grad.detach().zero_();
  }
}

bool Reducer::manages(const at::Tensor& param) const {
  return param_impls_.count(param.unsafeGetTensorImpl()) != 0;
}

std::vector<std::vector<size_t>> Reducer::bucket_assignment() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& bucket : buckets_) out.push_back(bucket.params);
  return out;
}

std::vector<int64_t> Reducer::bucket_sizes() const {
  std::vector<int64_t> out;
  for (const Bucket& bucket : buckets_) out.push_back(bucket.flat.numel() * bucket.flat.element_size());
  return out;
}

int64_t Reducer::reduced_bytes_per_step() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_) {
    const at::Tensor& sent = bucket.wire.defined() ? bucket.wire : bucket.flat;
    bytes += sent.numel() * sent.element_size();
  }
  return bytes;
}

int64_t Reducer::wire_bytes() const {
  int64_t bytes = 0;
  for (const Bucket& bucket : buckets_)
    if (bucket.wire.defined()) bytes += bucket.wire.numel() * bucket.wire.element_size();
  return bytes;
}

bool Reducer::buckets_rebuilt() const { return rebuilt_; }

std::vector<Reducer::BucketTiming> Reducer::last_bucket_timings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_timings_;
}

Reducer::Clock::time_point Reducer::last_backward_end() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return backward_end_;
}

at::Tensor Reducer::bucket_view(size_t index) const {
  MPIACCEL_CHECK(index < params_.size(), "DDP reducer: no parameter " + std::to_string(index));
  return buckets_[locator_[index].first].views[locator_[index].second];
}

int64_t Reducer::iterations() const { return iterations_; }

}  // namespace mpiaccel::detail
