// The FSDP runtime: forward interception, backward hooks, engine callback
// (see fsdp_engine.hpp and docs/fsdp.md).

#include "fsdp/fsdp_engine.hpp"

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include <cmath>

#include "fsdp/param_storage.hpp"
#include "fsdp/quantized_gather.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"
#include "runtime/trace.hpp"

namespace mpiaccel::detail {
namespace {

// Every rank appends its unit's index (+1) to its block as two base-128
// digits: small integers are exact in every float dtype, bf16 included.
constexpr int64_t kTag = 2;
constexpr int64_t kTagBase = 128;
constexpr size_t kMaxUnits = kTagBase * kTagBase - 1;

std::vector<at::Tensor> full_tensors(const std::vector<FsdpParam>& params) {
  std::vector<at::Tensor> out;
  for (const FsdpParam& p : params) out.push_back(p.full);
  return out;
}

std::vector<std::string> names_of(const std::vector<FsdpParam>& params) {
  std::vector<std::string> out;
  for (const FsdpParam& p : params) out.push_back(p.name);
  return out;
}

// A parameter no rank produced a gradient for keeps its sharded .grad, as it
// would in one process.
GradSyncOptions fsdp_sync_options() { return {"FSDP", MissingGradients::Allow, false, ""}; }

}  // namespace

FsdpEngine::FsdpEngine(std::vector<FsdpUnit> units, std::vector<FsdpParam> params,
                       FsdpComms comms, FsdpOptions options)
    : GradSync(full_tensors(params), names_of(params), comms.world, fsdp_sync_options()),
      units_(std::move(units)),
      params_(std::move(params)),
      comms_(std::move(comms)),
      options_(options),
      alive_(std::make_shared<FsdpEngine*>(this)),
      grad_copies_(comms_.world->timeout()) {
  grad_landing_.resize(params_.size());
  MPIACCEL_CHECK(!units_.empty() && units_.size() <= kMaxUnits,
                 "FSDP: " + std::to_string(units_.size()) + " units; at most " +
                     std::to_string(kMaxUnits) + " are supported");
  for (FsdpUnit& u : units_)
    if (u.module) unit_of_module_[u.module] = u.index;
  // Backward finishes the last units first; the root (embeddings, head) last.
  for (size_t k = units_.size(); k-- > 1;) reduce_order_.push_back(k);
  reduce_order_.push_back(0);
  std::vector<std::vector<size_t>> buckets;
  for (size_t k : reduce_order_) buckets.push_back(units_[k].params);
  set_buckets(std::move(buckets));
  next_in_forward_.assign(units_.size(), -1);
  // fp32 keeps the reduce-scatter's own average (ReduceOp::Avg).
  const GradientDivision division = gradient_division(comms_.reduce->size(), options_.reduce_dtype);
  if (division.split) {
    pre_scale_ = at::scalar_tensor(division.before, at::kDouble);
    if (division.after != 1.0) post_scale_ = at::scalar_tensor(division.after, at::kDouble);
  }
  start_hooks();
}

FsdpEngine::~FsdpEngine() {
  alive_.reset();
  stop_hooks();
  for (const FsdpUnit& u : units_) {
    wait_at_shutdown(u.gather_work, "FSDP");
    wait_at_shutdown(u.reduce_work, "FSDP");
  }
}

// ---------------------------------------------------------------- gathering

void FsdpEngine::launch_gather(FsdpUnit& u, bool exact) {
  if (!exact && u.secondary.defined() && in_backward()) {
    launch_secondary_gather(u);
    return;
  }
  if (!exact && options_.quantized_weights) {
    launch_quantized_gather(u);
    return;
  }
  const int parts = u.layout.parts();
  const int64_t block = u.layout.block();
  const int64_t stride = block + kTag;
  // Mixed precision: the shard is cast into a param_dtype buffer, so the
  // gathered parameters hold param_dtype values (unpacking widens them again).
  const auto dtype = exact ? u.full_options.dtype().toScalarType()
                           : options_.gather_dtype.value_or(u.full_options.dtype().toScalarType());
  at::Tensor buffer = at::empty({parts * stride}, u.full_options.dtype(dtype));
  // The own block inside the output: the communicator gathers in place.
  at::Tensor own = buffer.narrow(0, comms_.gather->rank() * stride, stride);
  // cpu_offload on a GPU: from pinned memory, queued on the compute stream
  // without stalling the host.
  own.narrow(0, 0, block).copy_(u.local, /*non_blocking=*/u.local.is_pinned());
  const int64_t tag = static_cast<int64_t>(u.index) + 1;
  own.narrow(0, block, 1).fill_(static_cast<double>(tag % kTagBase));
  own.narrow(0, block + 1, 1).fill_(static_cast<double>(tag / kTagBase));
  u.gather_work = comms_.gather->all_gather_async(buffer, own);
  u.gather_buffer = buffer;
  u.gather_kind = FsdpGatherKind::Full;
}

// ZeRO++ qwZ: this rank's block as int8 with per-group scales, the tag beside them.
void FsdpEngine::launch_quantized_gather(FsdpUnit& u) {
  const QuantizedBlock layout = quantized_block(u.layout.block(), kTag);
  at::Tensor buffer = at::empty({u.layout.parts() * layout.stride}, u.full_options.dtype(at::kByte));
  at::Tensor own = buffer.narrow(0, comms_.gather->rank() * layout.stride, layout.stride);
  const int64_t tag = static_cast<int64_t>(u.index) + 1;
  const at::Tensor tags =
      at::tensor({static_cast<float>(tag % kTagBase), static_cast<float>(tag / kTagBase)}).to(buffer.device());
  quantize_blocks(u.local.view({1, -1}), tags.view({1, -1}), layout, own);
  u.gather_work = comms_.gather->all_gather_async(buffer, own);
  u.gather_buffer = buffer;
  u.gather_kind = FsdpGatherKind::Int8;
}

// ZeRO++ hpZ: the group's parts of forward's gathered buffer make the whole
// again, tags included, without leaving the group (a node).
void FsdpEngine::launch_secondary_gather(FsdpUnit& u) {
  Communicator& group = *comms_.secondary;
  const int64_t part = u.secondary.numel();
  at::Tensor buffer = at::empty({part * group.size()}, u.secondary.options());
  at::Tensor own = buffer.narrow(0, group.rank() * part, part);
  own.copy_(u.secondary);
  u.gather_work = group.all_gather_async(buffer, own);
  u.gather_buffer = buffer;
  u.gather_kind = FsdpGatherKind::InGroup;
}

bool FsdpEngine::keeps_secondary(const FsdpUnit& u) const {
  return comms_.secondary && !u.secondary.defined() && !u.persistent() && at::GradMode::is_enabled() &&
         !in_backward();
}

at::Tensor FsdpEngine::finish_gather_buffer(FsdpUnit& u) {
  WorkHandle work = std::move(u.gather_work);
  at::Tensor buffer = std::move(u.gather_buffer);
  u.gather_work.reset();
  u.gather_buffer = at::Tensor();
  work->wait();
  if (Tracer::instance().enabled()) trace_work("all_gather " + u.display_name() + trace_suffix(u.gather_kind), work);
  if (u.gather_kind == FsdpGatherKind::Int8) {
    buffer = dequantize_blocks(buffer, quantized_block(u.layout.block(), kTag), u.layout.parts(), u.full_options);
  }
  const int64_t block = u.layout.block();
  const at::Tensor tags = buffer.view({u.layout.parts(), block + kTag}).narrow(1, block, kTag);
  if (!has_streams(buffer.device())) {
    check_tags(u, tags.to(at::kDouble).contiguous());
    return buffer;
  }
  check_landed_tags(/*wait=*/false);
  at::Tensor host = staging_empty({u.layout.parts(), kTag}, at::kDouble, buffer.device());
  host.copy_(tags.to(at::kDouble), /*non_blocking=*/true);
  pending_tags_.push_back({u.index, host, StreamEvent::record_current(buffer.device())});
  return buffer;
}

void FsdpEngine::check_tags(const FsdpUnit& u, const at::Tensor& tags) const {
  const int parts = u.layout.parts();
  const double* t = tags.data_ptr<double>();
  const double expected = static_cast<double>(u.index + 1);
  bool same = true;
  for (int r = 0; r < parts; ++r) same = same && t[2 * r] + kTagBase * t[2 * r + 1] == expected;
  if (same) return;
  // Every rank of the gather holds every tag: all of them throw this message.
  // (An hpZ gather in backward spans one secondary group: the other groups
  // meet the failure at their next collective, within its deadline. Forward's
  // gathers, over the whole shard group, catch a divergence first.)
  std::string who;
  for (int r = 0; r < parts; ++r) {
    const double v = t[2 * r] + kTagBase * t[2 * r + 1] - 1;
    std::string name = "?";
    if (std::isfinite(v) && v >= 0 && v < double(units_.size()) && v == std::floor(v))
      name = units_[static_cast<size_t>(v)].display_name();
    who += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + ": " + name;
  }
  MPIACCEL_THROW("FSDP: the ranks of a shard group gathered different units at the same point (" +
                 who + "; '?' = a gather of another size): their control flow diverged. "
                 "Every rank must run the same units in the same order (a unit skipped or added "
                 "on some ranks only cannot be sharded); make every rank run every unit, or "
                 "use DDP with find_unused_parameters");
}

void FsdpEngine::check_landed_tags(bool wait) {
  size_t checked = 0;
  for (; checked < pending_tags_.size(); ++checked) {
    PendingTags& pending = pending_tags_[checked];
    if (wait) pending.landed.wait_host(comms_.gather->timeout(), "FSDP's unit-tag copy");
    else if (!pending.landed.reached()) break;
    check_tags(units_[pending.unit], pending.host);
  }
  pending_tags_.erase(pending_tags_.begin(), pending_tags_.begin() + static_cast<long>(checked));
}

void FsdpEngine::finish_gather(FsdpUnit& u) {
  const at::Tensor buffer = finish_gather_buffer(u);
  if (keeps_secondary(u)) {
    const int64_t part = buffer.numel() / comms_.secondary->size();
    u.secondary = buffer.narrow(0, comms_.secondary->rank() * part, part).clone();
  }
  const int64_t stride = u.layout.block() + kTag;
  at::NoGradGuard no_grad;
  for (size_t s = 0; s < u.params.size(); ++s)
    u.layout.unpack(buffer, stride, s, allocate_storage(params_[u.params[s]].full));
  u.gathered = true;
}

void FsdpEngine::gather_now(FsdpUnit& u) {
  if (u.gathered && !u.gather_work) return;
  if (!u.gather_work) launch_gather(u);
  finish_gather(u);
}

void FsdpEngine::prefetch(size_t index) {
  FsdpUnit& u = units_[index];
  if (u.persistent() || u.gathered || u.gather_work) return;
  launch_gather(u);
}

void FsdpEngine::reshard(FsdpUnit& u) {
  if (u.persistent()) return;
  if (u.gather_work) finish_gather_buffer(u);  // a prefetch nobody used
  for (size_t p : u.params) free_storage(params_[p].full);
  u.gathered = false;
}

void FsdpEngine::drain_gathers() {
  for (FsdpUnit& u : units_)
    if (u.gather_work) finish_gather_buffer(u);
}

std::vector<at::Tensor> FsdpEngine::gather_copy(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  FsdpUnit& u = units_.at(index);
  // A copy must be exact (state dicts): a prefetch in param_dtype, in int8 or
  // from hpZ's copy of one will not do.
  if (u.gather_work) finish_gather_buffer(u);
  launch_gather(u, true);
  const at::Tensor buffer = finish_gather_buffer(u);
  check_landed_tags(/*wait=*/true);
  const int64_t stride = u.layout.block() + kTag;
  std::vector<at::Tensor> out;
  for (size_t s = 0; s < u.params.size(); ++s) {
    at::Tensor full = at::empty(u.layout.slots()[s].shape, u.full_options);
    u.layout.unpack(buffer, stride, s, full);
    out.push_back(full);
  }
  return out;
}

// ------------------------------------------------------------------ forward

at::Tensor FsdpEngine::run(torch::nn::Module& module, const at::Tensor& input,
                           const UnitForward& forward) {
  auto it = unit_of_module_.find(&module);
  if (it == unit_of_module_.end()) return forward(input);  // not a unit: nothing to gather
  const size_t index = it->second;
  const bool recording = at::GradMode::is_enabled();
  int64_t invocation = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    FsdpUnit& u = units_[index];
    u.managed = true;
    gather_now(u);
    // The unit that ran after this one last iteration gathers while this one computes.
    if (options_.forward_prefetch && next_in_forward_[index] >= 0)
      prefetch(static_cast<size_t>(next_in_forward_[index]));
    if (recording) {
      invocation = static_cast<int64_t>(forward_order_.size());
      forward_order_.push_back(index);
      u.last_invocation = invocation;
    }
  }
  at::Tensor output = forward(input);
  const bool backward_follows = recording && output.defined() && output.requires_grad() &&
                                output.grad_fn() != nullptr;
  if (backward_follows) {
    // Runs when the gradient of the unit's output is complete, i.e. just
    // before the unit's own backward: the parameters must be back by then.
    std::weak_ptr<FsdpEngine*> alive = alive_;
    output.register_hook([alive, index, invocation](const at::Tensor&) {
      if (auto self = alive.lock()) (*self)->pre_backward(index, invocation);
    });
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // Without a backward to come (eval, no_grad), nothing needs the parameters,
  // nor hpZ's part of them.
  if (!backward_follows) units_[index].secondary = at::Tensor();
  if (!backward_follows || options_.reshard_after_forward) reshard(units_[index]);
  return output;
}

// ----------------------------------------------------------------- backward

void FsdpEngine::pre_backward(size_t index, int64_t invocation) {
  std::lock_guard<std::mutex> lock(mutex_);
  begin_backward();
  gather_now(units_[index]);
  // Backward runs the units in reverse: the one before this gathers now.
  if (options_.backward_prefetch == BackwardPrefetch::Pre && invocation > 0 &&
      invocation <= static_cast<int64_t>(forward_order_.size()))
    prefetch(forward_order_[static_cast<size_t>(invocation - 1)]);
}

void FsdpEngine::on_bucket_filled(size_t bucket) {
  FsdpUnit& u = unit_of_bucket(bucket);
  // Every node that saved these parameters has produced their gradients, so
  // no later node reads them: the full parameters can go, and hpZ's part.
  reshard(u);
  u.secondary = at::Tensor();
  if (options_.backward_prefetch == BackwardPrefetch::Post && u.last_invocation > 0 &&
      u.last_invocation <= static_cast<int64_t>(forward_order_.size()))
    prefetch(forward_order_[static_cast<size_t>(u.last_invocation - 1)]);
}

void FsdpEngine::launch_reduce(FsdpUnit& u) {
  const int parts = u.layout.parts();
  const int64_t block = u.layout.block();
  if (block == 0) return;  // a unit without parameters (the same on every rank)
  const auto own_dtype = u.full_options.dtype().toScalarType();
  const auto dtype = options_.quantized_gradients ? own_dtype : options_.reduce_dtype.value_or(own_dtype);
  at::Tensor input = at::empty({parts * block}, u.full_options.dtype(dtype));
  at::NoGradGuard no_grad;
  for (size_t s = 0; s < u.params.size(); ++s) {
    at::Tensor& grad = params_[u.params[s]].full.mutable_grad();
    if (grad.defined()) {
      u.layout.pack(input, block, s, grad);
      grad = at::Tensor();  // the full gradient is not needed any more
    } else {
      u.layout.pack(input, block, s, at::zeros(u.layout.slots()[s].shape, u.full_options));
    }
  }
  if (options_.quantized_gradients) {
    launch_quantized_reduce(u, input);
    return;
  }
  u.reduce_out = at::empty({block}, input.options());
  if (!pre_scale_.defined()) {
    u.reduce_work = comms_.reduce->reduce_scatter_async(u.reduce_out, input, ReduceOp::Avg);
    return;
  }
  // 16-bit: divided before and after the sum, so it neither underflows nor overflows.
  input.mul_(pre_scale_);
  u.reduce_work = comms_.reduce->reduce_scatter_async(u.reduce_out, input, ReduceOp::Sum);
}

// ZeRO++ qgZ: block r of the gradients goes to rank r as int8 with scales;
// each rank sums what it receives in float32 (finish_quantized_reduce).
void FsdpEngine::launch_quantized_reduce(FsdpUnit& u, const at::Tensor& input) {
  const int parts = u.layout.parts();
  const QuantizedBlock layout = quantized_block(u.layout.block(), 0);
  at::Tensor send = at::empty({parts * layout.stride}, input.options().dtype(at::kByte));
  quantize_blocks(input.view({parts, -1}), at::Tensor(), layout, send);
  u.reduce_received = at::empty_like(send);
  u.reduce_work = comms_.reduce->all_to_all_async(u.reduce_received, send);
}

void FsdpEngine::finish_quantized_reduce(FsdpUnit& u) {
  const int parts = u.layout.parts();
  const at::Tensor received = dequantize_blocks(u.reduce_received, quantized_block(u.layout.block(), 0), parts,
                                                u.full_options.dtype(at::kFloat));
  u.reduce_received = at::Tensor();
  u.reduce_out = received.view({parts, -1}).sum(0).div_(parts).to(u.full_options.dtype());
}

void FsdpEngine::drop_secondaries() {
  for (FsdpUnit& u : units_) u.secondary = at::Tensor();
}

void FsdpEngine::backward_ending() {
  // No unit stays gathered past backward; reductions of units whose
  // gradients did not all arrive launch next, with what there is.
  drain_gathers();
  check_landed_tags(/*wait=*/true);
  for (FsdpUnit& u : units_)
    if (u.gathered) reshard(u);
  drop_secondaries();
}

void FsdpEngine::finish_buckets() {
  std::vector<WorkHandle> across;
  for (size_t k : reduce_order_) {
    FsdpUnit& u = units_[k];
    if (!u.reduce_work) continue;
    u.reduce_work->wait();
    const bool quantized = u.reduce_received.defined();
    if (Tracer::instance().enabled())
      trace_work(quantized ? "all_to_all " + u.display_name() + " int8" : "reduce_scatter " + u.display_name(),
                 u.reduce_work);
    u.reduce_work.reset();
    if (quantized) {
      finish_quantized_reduce(u);
    } else {
      if (u.reduce_out.scalar_type() != u.full_options.dtype().toScalarType())
        u.reduce_out = u.reduce_out.to(u.full_options.dtype().toScalarType());
      if (post_scale_.defined()) u.reduce_out.mul_(post_scale_);
    }
    // Hybrid: each group averaged its own ranks; the groups average next.
    if (comms_.replica) across.push_back(comms_.replica->all_reduce_async(u.reduce_out, ReduceOp::Avg));
  }
  wait_all(across);
}

void FsdpEngine::apply(const std::vector<int32_t>& global_used) {
  at::AutoDispatchBelowADInplaceOrView plain_views;  // plain aliases: zero_grad() may detach_ them
  std::vector<size_t> accumulate;  // offloaded gradients added to an existing .grad
  for (FsdpUnit& u : units_) {
    for (size_t s = 0; s < u.params.size(); ++s) {
      const size_t p = u.params[s];
      if (!global_used[p] || !u.reduce_out.defined()) continue;
      at::Tensor rows = u.layout.shard_view(u.reduce_out, s);
      at::Tensor& grad = params_[p].shard.mutable_grad();
      if (rows.device() != params_[p].shard.device()) {
        // cpu_offload on a GPU: down into a pinned buffer on the copy stream.
        at::Tensor& landing = grad_landing_[p];
        if (!landing.defined() || (grad.defined() && grad.is_alias_of(landing)))
          landing = staging_empty(rows.sizes(), rows.scalar_type(), rows.device());
        grad_copies_.to_host(landing, rows);
        if (grad.defined()) accumulate.push_back(p);
        else grad = landing;
        continue;
      }
      if (grad.defined()) grad.add_(rows);
      else grad = rows;
    }
    u.reduce_out = at::Tensor();
  }
  // The optimizer and the norm read them next.
  grad_copies_.wait_all_landed();
  for (size_t p : accumulate) params_[p].shard.mutable_grad().add_(grad_landing_[p]);
}

void FsdpEngine::backward_ended(bool /*synchronized*/) {
  for (FsdpUnit& u : units_) u.last_invocation = -1;
  std::fill(next_in_forward_.begin(), next_in_forward_.end(), -1);
  for (size_t k = 0; k + 1 < forward_order_.size(); ++k)
    if (next_in_forward_[forward_order_[k]] < 0)
      next_in_forward_[forward_order_[k]] = static_cast<int64_t>(forward_order_[k + 1]);
  forward_order_.clear();
}

// ------------------------------------------------------- outside backward

void FsdpEngine::before_step() {
  std::lock_guard<std::mutex> lock(mutex_);
  MPIACCEL_CHECK(!in_backward(), "FSDP: optimizer step during a backward pass");
  drain_gathers();
  check_landed_tags(/*wait=*/true);
  for (FsdpUnit& u : units_)
    if (u.gathered) reshard(u);
  drop_secondaries();  // the shards change
}

void FsdpEngine::refresh_gathered() {
  std::lock_guard<std::mutex> lock(mutex_);
  drain_gathers();
  drop_secondaries();
  // All launched first, so the gathers of several units overlap.
  for (FsdpUnit& u : units_) {
    if (u.persistent()) launch_gather(u);
    else if (u.gathered) reshard(u);
  }
  for (FsdpUnit& u : units_)
    if (u.gather_work) finish_gather(u);
}

void FsdpEngine::zero_full_grads() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (FsdpParam& p : params_) p.full.mutable_grad() = at::Tensor();
}

}  // namespace mpiaccel::detail
