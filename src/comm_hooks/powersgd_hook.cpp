// PowerSGD and batched PowerSGD (see powersgd_hook.hpp).

#include "comm_hooks/powersgd_hook.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "comm_hooks/all_reduce_hook.hpp"
#include "comm_hooks/orthogonalize.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel {
namespace detail {

// One bucket between launch and finish.
struct PowerSgdHook::Flight {
  GradBucket* bucket = nullptr;
  std::vector<at::Tensor> matrices;  // M: views of the buffer (PowerSGD) or of `square` (batched)
  std::vector<at::Tensor*> qs;       // each matrix's Q, replaced by the new one
  std::vector<at::Tensor> ps;        // each matrix's P: views of `pack`
  std::vector<std::pair<at::Tensor, at::Tensor>> plain;     // (gradient, its slot in pack)
  std::vector<std::pair<at::Tensor, at::Tensor>> feedback;  // (gradient, its error)
  at::Tensor square;                 // batched: the bucket, padded to side²
  at::Tensor pack;                   // the uncompressed gradients, then every P
  at::Tensor wire;                   // pack in the allreduce dtype; undefined without
  double after = 1.0;                // the uncompressed gradients' division after the sum
};

namespace {

constexpr const char* kWhat = "[ddp] comm_hook = powersgd";

int64_t approximation_rank(int64_t rows, int64_t cols, int64_t rank) {
  return std::min({rows, cols, rank});
}

at::Tensor flat_view(const at::Tensor& t) { return t.view({-1}); }

// Sends `pack` (in `dtype` when given) and returns the wire copy, if any.
at::Tensor wire_copy(const at::Tensor& pack, std::optional<at::ScalarType> dtype) {
  if (!dtype || *dtype == pack.scalar_type()) return at::Tensor();
  return pack.to(*dtype);
}

}  // namespace

PowerSgdHook::PowerSgdHook(PowerSgdOptions options) : options_(std::move(options)) {
  MPIACCEL_CHECK(options_.rank >= 1, std::string(kWhat) + ": powersgd_rank must be at least 1, got " +
                                         std::to_string(options_.rank));
  MPIACCEL_CHECK(options_.start_iter >= 0, std::string(kWhat) + ": powersgd_start_iter must be >= 0");
  MPIACCEL_CHECK(options_.min_compression_rate >= 0 && options_.orthogonalization_epsilon >= 0,
                 std::string(kWhat) + ": powersgd_min_compression_rate and "
                                      "powersgd_orthogonalization_epsilon must be >= 0");
}

at::Tensor PowerSgdHook::fresh_q(int64_t cols, int64_t rank, uint64_t key,
                                 const at::TensorOptions& options) const {
  // The same seed on every rank, so every rank starts from the same Q.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(options_.seed * 0x9E3779B97F4A7C15ull + key);
  at::Tensor q = at::randn({cols, rank}, generator, at::TensorOptions().dtype(at::kFloat));
  orthogonalize_columns(q, options_.orthogonalization_epsilon);
  return q.to(options);
}

void PowerSgdHook::attach(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                          Communicator& comm) {
  comm_ = &comm;
  params_.assign(params.size(), ParamState{});
  for (size_t i = 0; i < params.size(); ++i) {
    ParamState& state = params_[i];
    const at::Tensor& p = params[i];
    state.name = names[i];
    state.rows = p.dim() >= 2 ? p.size(0) : 0;
    state.cols = state.rows > 0 ? p.numel() / state.rows : 0;
    const auto options = p.options().requires_grad(false);
    if (!options_.batched && state.rows > 0) {
      const int64_t rank = approximation_rank(state.rows, state.cols, options_.rank);
      const double compressed_size = double(state.rows + state.cols) * double(rank);
      if (compressed_size * options_.min_compression_rate < double(state.rows * state.cols)) {
        state.rank = rank;
        state.q = fresh_q(state.cols, rank, param_key(i), options);
      }
    }
    if (options_.error_feedback && compressed(i)) state.error = at::zeros({p.numel()}, options);
  }
  if (comm.rank() == 0) log_info(summary());
}

// What one step sends, for the log.
std::string PowerSgdHook::summary() const {
  const std::string head = name() + " (rank " + std::to_string(options_.rank) + ", from step " +
                           std::to_string(options_.start_iter) + ")";
  if (options_.batched) return head + ": each bucket sent as a square matrix's rank-r factors";
  int64_t whole = 0, sent = 0, matrices = 0;
  for (const ParamState& state : params_) {
    const int64_t numel = state.rows > 0 ? state.rows * state.cols : 0;
    whole += state.rank > 0 ? numel : 0;
    sent += state.rank > 0 ? (state.rows + state.cols) * state.rank : 0;
    matrices += state.rank > 0 ? 1 : 0;
  }
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.1f", sent > 0 ? double(whole) / double(sent) : 0.0);
  return head + ": " + std::to_string(matrices) + " of " + std::to_string(params_.size()) +
         " gradients compressed, " + std::to_string(whole) + " numbers sent as " + std::to_string(sent) + " (" +
         ratio + "x fewer); the rest all-reduced whole";
}

HookWork PowerSgdHook::plain_all_reduce(GradBucket& bucket) {
  if (bucket.last) ++iteration_;
  const at::Tensor wire = wire_copy(bucket.buffer, options_.allreduce_dtype);
  return average_async(*bucket.comm, bucket.buffer, wire,
                       gradient_division(bucket.comm->size(), options_.allreduce_dtype));
}

HookWork PowerSgdHook::launch(GradBucket& bucket) {
  MPIACCEL_CHECK(comm_ != nullptr, std::string(kWhat) + ": launch before attach");
  if (iteration_ < options_.start_iter) return plain_all_reduce(bucket);
  std::shared_ptr<Flight> flight = plan(bucket);
  HookWork work;
  work.work = bucket.comm->all_reduce_async(flight->wire.defined() ? flight->wire : flight->pack, ReduceOp::Sum);
  work.finish = [this, flight] { finish(*flight); };
  return work;
}

// Error feedback, the matrices and their Qs, and the pack of uncompressed
// gradients and P = M Q, ready to all-reduce.
std::shared_ptr<PowerSgdHook::Flight> PowerSgdHook::plan(GradBucket& bucket) {
  auto flight = std::make_shared<Flight>();
  flight->bucket = &bucket;
  const auto options = bucket.buffer.options();
  for (size_t k = 0; k < bucket.gradients.size(); ++k) {
    ParamState& state = params_[bucket.params[k]];
    const at::Tensor& gradient = bucket.gradients[k];
    if (state.error.defined()) {
      gradient.add_(state.error.view_as(gradient));
      state.error.copy_(flat_view(gradient));  // M_local, until finish subtracts M̂
      flight->feedback.emplace_back(gradient, state.error);
    }
    if (options_.batched) continue;
    if (state.rank == 0) {
      flight->plain.emplace_back(gradient, at::Tensor());
      continue;
    }
    if (!options_.warm_start) state.q = fresh_q(state.cols, state.rank, param_key(bucket.params[k]), options);
    flight->matrices.push_back(gradient.view({state.rows, state.cols}));
    flight->qs.push_back(&state.q);
  }
  if (options_.batched) {
    const int64_t n = bucket.buffer.numel();
    const auto side = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
    const int64_t rank = approximation_rank(side, side, options_.rank);
    flight->square = at::zeros({side * side}, options);
    flight->square.narrow(0, 0, n).copy_(bucket.buffer);
    at::Tensor& q = bucket_q_[bucket.index];
    if (!q.defined() || q.size(0) != side || !options_.warm_start)
      q = fresh_q(side, rank, bucket_key(bucket.index), options);
    flight->matrices.push_back(flight->square.view({side, side}));
    flight->qs.push_back(&q);
  }
  int64_t numel = 0;
  for (const auto& [gradient, slot] : flight->plain) numel += gradient.numel();
  for (size_t m = 0; m < flight->matrices.size(); ++m) numel += flight->matrices[m].size(0) * flight->qs[m]->size(1);
  flight->pack = at::empty({numel}, options);
  const GradientDivision division = gradient_division(bucket.comm->size(), options_.allreduce_dtype);
  flight->after = division.after;
  int64_t offset = 0;
  for (auto& [gradient, slot] : flight->plain) {
    slot = flight->pack.narrow(0, offset, gradient.numel());
    at::mul_out(slot, flat_view(gradient), at::scalar_tensor(division.before, at::kDouble));
    offset += gradient.numel();
  }
  for (size_t m = 0; m < flight->matrices.size(); ++m) {
    const at::Tensor& q = *flight->qs[m];
    at::Tensor p = flight->pack.narrow(0, offset, flight->matrices[m].size(0) * q.size(1)).view({-1, q.size(1)});
    at::mm_out(p, flight->matrices[m], q);
    flight->ps.push_back(p);
    offset += p.numel();
  }
  flight->wire = wire_copy(flight->pack, options_.allreduce_dtype);
  return flight;
}

// After P's all-reduce: the uncompressed gradients' mean; P̂, Q = Mᵀ P̂ and
// its all-reduce; M ← P̂ Qᵀ; the new errors.
void PowerSgdHook::finish(Flight& flight) {
  GradBucket& bucket = *flight.bucket;
  if (flight.wire.defined()) flight.pack.copy_(flight.wire);
  for (const auto& [gradient, slot] : flight.plain) {
    at::Tensor out = flat_view(gradient);
    if (flight.after != 1.0) at::mul_out(out, slot, at::scalar_tensor(flight.after, at::kDouble));
    else out.copy_(slot);
  }
  if (!flight.matrices.empty()) {
    int64_t numel = 0;
    for (const at::Tensor* q : flight.qs) numel += q->numel();
    at::Tensor q_pack = at::empty({numel}, flight.pack.options());
    std::vector<at::Tensor> new_qs;
    int64_t offset = 0;
    for (size_t m = 0; m < flight.matrices.size(); ++m) {
      orthogonalize_columns(flight.ps[m], options_.orthogonalization_epsilon);
      at::Tensor q = q_pack.narrow(0, offset, flight.qs[m]->numel()).view(flight.qs[m]->sizes());
      at::mm_out(q, flight.matrices[m].t(), flight.ps[m]);
      new_qs.push_back(q);
      offset += q.numel();
    }
    const at::Tensor q_wire = wire_copy(q_pack, options_.allreduce_dtype);
    bucket.comm->all_reduce_async(q_wire.defined() ? q_wire : q_pack, ReduceOp::Sum)->wait();
    if (q_wire.defined()) q_pack.copy_(q_wire);
    q_pack.div_(bucket.comm->size());
    for (size_t m = 0; m < flight.matrices.size(); ++m) {
      flight.qs[m]->copy_(new_qs[m]);
      at::mm_out(flight.matrices[m], flight.ps[m], new_qs[m].t());
    }
  }
  if (flight.square.defined()) bucket.buffer.copy_(flight.square.narrow(0, 0, bucket.buffer.numel()));
  for (const auto& [gradient, error] : flight.feedback) error.sub_(flat_view(gradient));
  if (bucket.last) ++iteration_;
}

at::Tensor PowerSgdHook::initial_bucket_q(size_t index, int64_t side) const {
  return fresh_q(side, approximation_rank(side, side, options_.rank), bucket_key(index), at::TensorOptions());
}

void PowerSgdHook::add_state(ShardedStateDict& dict) {
  const bool writer = comm_->rank() == 0;
  dict.tensors.push_back({state_name("iteration"), {1}, 0, writer ? 1 : 0,
                          at::full({writer ? 1 : 0}, iteration_, at::kLong)});
  for (const ParamState& state : params_) {
    if (state.q.defined())
      dict.tensors.push_back({state_name("q/" + state.name), state.q.sizes().vec(), 0,
                              writer ? state.q.size(0) : 0, writer ? state.q : state.q.narrow(0, 0, 0)});
    if (state.error.defined())
      dict.tensors.push_back({state_name("error/" + state.name), {comm_->size(), state.error.numel()},
                              comm_->rank(), 1, state.error.view({1, -1})});
  }
}

void PowerSgdHook::add_load_targets(ShardedStateDict& dict) {
  // What the checkpoint lacks (another world size's errors, no hook) starts fresh.
  for (size_t i = 0; i < params_.size(); ++i) {
    ParamState& state = params_[i];
    if (state.q.defined()) state.q = fresh_q(state.cols, state.rank, param_key(i), state.q.options());
    if (state.error.defined()) state.error.zero_();
  }
  bucket_q_.clear();
  iteration_ = 0;
  loaded_iteration_ = at::full({1}, int64_t{0}, at::kLong);
  const auto optional = [&](ShardedTensor tensor) {
    tensor.optional = true;
    dict.tensors.push_back(std::move(tensor));
  };
  optional({state_name("iteration"), {1}, 0, 1, loaded_iteration_});
  for (const ParamState& state : params_) {
    if (state.q.defined()) optional({state_name("q/" + state.name), state.q.sizes().vec(), 0, state.q.size(0), state.q});
    if (state.error.defined())
      optional({state_name("error/" + state.name), {comm_->size(), state.error.numel()}, comm_->rank(), 1,
                state.error.view({1, -1})});
  }
}

void PowerSgdHook::finish_load() {
  if (loaded_iteration_.defined()) iteration_ = loaded_iteration_.item<int64_t>();
  loaded_iteration_ = at::Tensor();
}

int64_t PowerSgdHook::state_bytes() const {
  int64_t bytes = 0;
  const auto count = [&](const at::Tensor& t) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  };
  for (const ParamState& state : params_) {
    count(state.q);
    count(state.error);
  }
  for (const auto& [index, q] : bucket_q_) count(q);
  return bytes;
}

}  // namespace detail

std::shared_ptr<CommHook> make_powersgd_hook(const PowerSgdOptions& options) {
  return std::make_shared<detail::PowerSgdHook>(options);
}

}  // namespace mpiaccel
