// FSDP: parameters sharded per unit, gathered around each unit's run.

#include "fsdp/fsdp_strategy.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fsdp/fsdp_comms.hpp"
#include "fsdp/shard_streaming.hpp"
#include "fsdp/unit_builder.hpp"
#include "fsdp/wrap_policy.hpp"
#include "grad_sync/grad_math.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/unit.hpp"
#include "state/model_sync.hpp"
#include "state/optimizer_state.hpp"

namespace mpiaccel {
namespace detail {
namespace {

// "FSDP: 4 units (LlamaDecoderLayer x 4) and the root, sharded over 4 ranks".
std::string describe_units(const std::vector<FsdpUnit>& units, int shard_ranks) {
  std::map<std::string, int> classes;
  for (const FsdpUnit& unit : units)
    if (unit.module) ++classes[unit.cls];
  std::string text;
  for (const auto& [cls, count] : classes) text += (text.empty() ? "" : ", ") + cls + " x " + std::to_string(count);
  const size_t unit_count = units.empty() ? 0 : units.size() - 1;
  return "FSDP: " + std::to_string(unit_count) + " unit(s)" + (text.empty() ? "" : " (" + text + ")") +
         " and the root, sharded over " + std::to_string(shard_ranks) + " rank(s)";
}

FsdpOptions options_from(const FsdpConfig& config) {
  // [fsdp] activation_checkpointing is installed by the Accelerator around
  // FSDP's own unit interceptor (src/recompute), not here.
  FsdpOptions options;
  options.quantized_weights = config.quantized_weights;
  options.quantized_gradients = config.quantized_gradients;
  MPIACCEL_CHECK(config.secondary_partition_size == 1 ||
                     (config.sharding_strategy == ShardingStrategy::FullShard && config.reshard_after_forward),
                 "[fsdp] secondary_partition_size (ZeRO++ hpZ) keeps a second shard for backward when forward "
                 "frees the gathered parameters: it needs sharding_strategy = FULL_SHARD and "
                 "reshard_after_forward = true; set secondary_partition_size = 1 otherwise");
  // SHARD_GRAD_OP is FSDP1's name for keeping parameters from forward to backward.
  options.reshard_after_forward =
      config.sharding_strategy != ShardingStrategy::ShardGradOp && config.reshard_after_forward;
  options.forward_prefetch = config.forward_prefetch;
  options.backward_prefetch = config.backward_prefetch;
  return options;
}

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? t.numel() * t.element_size() : 0; }

}  // namespace

FsdpStrategy::FsdpStrategy(const FsdpConfig& config, std::shared_ptr<Communicator> comm,
                           std::string name, const PrecisionPolicy& precision)
    : config_(config), options_(options_from(config)), comm_(std::move(comm)), name_(std::move(name)) {
  options_.gather_dtype = wire_dtype(precision.param_dtype);
  options_.reduce_dtype = wire_dtype(precision.reduce_dtype);
  MPIACCEL_CHECK(comm_, "FSDP: no communicator");
}

FsdpStrategy::~FsdpStrategy() {
  if (auto* has_units = dynamic_cast<HasUnits*>(model_.get()))
    if (has_units->units().interceptor() == engine_.get()) has_units->units().set_interceptor(nullptr);
}

void FsdpStrategy::require_prepared(const char* what) const {
  MPIACCEL_CHECK(engine_ && model_, "FSDP: " + std::string(what) + " before prepare()");
}

void FsdpStrategy::prepare(std::shared_ptr<torch::nn::Module> model,
                           std::shared_ptr<torch::optim::Optimizer> optimizer) {
  MPIACCEL_CHECK(model, "FSDP prepare: no model");
  MPIACCEL_CHECK(optimizer, "FSDP prepare: no optimizer (FSDP re-points it at the shards)");
  MPIACCEL_CHECK(!engine_, "FSDP prepare: already prepared; prepare a strategy once");
  MPIACCEL_CHECK(optimizer->state().empty(),
                 "FSDP prepare: the optimizer has already taken a step; prepare() must come "
                 "before the first step, since the optimizer's state is kept per shard");
  check_same_model_across_ranks(*comm_, *model);
  // Ranks that built the model deferred (cpu_ram_efficient_loading) get only
  // their shards, streamed from rank 0 once the units are laid out; a full
  // build gets rank 0's whole model, as DDP.
  const bool streamed = agree_streamed_init(*comm_, *model);
  if (streamed) broadcast_unsharded_state(*comm_, *model);
  else broadcast_module_state(*comm_, *model);

  auto* has_units = dynamic_cast<HasUnits*>(model.get());
  const std::vector<PlannedUnit> plan = plan_units(*model, config_);
  MPIACCEL_CHECK(has_units || plan.empty(),
                 "FSDP: the model (" + model->name() + ") does not derive from mpiaccel::HasUnits, "
                 "so FSDP cannot run the " + std::to_string(plan.size()) + " units the wrap "
                 "policy picked (first: " + (plan.empty() ? "" : plan.front().name) + "). Derive "
                 "the model from mpiaccel::HasUnits and run each unit through "
                 "units().run(*unit, x, [&](const at::Tensor& in) { return unit->forward(in); }) "
                 "(docs/fsdp.md), or set [fsdp] auto_wrap_policy = NO_WRAP");
  MPIACCEL_CHECK(!has_units || !has_units->units().interceptor(),
                 "FSDP: the model's units already have an interceptor installed (another "
                 "strategy prepared on the same model?); prepare one strategy per model");

  FsdpComms comms = make_fsdp_comms(config_, comm_);
  const int shard_ranks = comms.gather->size();
  BuiltUnits built =
      build_units(*model, plan, comms.gather->size(), comms.gather->rank(), config_.cpu_offload);
  if (streamed) stream_shards(*comm_, comms.gather->rank(), built);

  // The optimizer steps on the shards: each full parameter in its groups is
  // replaced by its shard, so weight-decay groups stay as they were.
  std::unordered_map<const void*, at::Tensor> shard_of;
  for (const FsdpParam& p : built.params) shard_of.emplace(p.full.unsafeGetTensorImpl(), p.shard);
  std::unordered_set<const void*> model_params;
  for (const auto& p : model->parameters(/*recurse=*/true)) model_params.insert(p.unsafeGetTensorImpl());
  for (auto& group : optimizer->param_groups())
    for (at::Tensor& p : group.params()) {
      auto it = shard_of.find(p.unsafeGetTensorImpl());
      if (it != shard_of.end()) {
        p = it->second;
        continue;
      }
      MPIACCEL_CHECK(model_params.count(p.unsafeGetTensorImpl()),
                     "FSDP prepare: the optimizer holds a tensor of shape " + shape_text(p.sizes()) +
                         " that is not a parameter of the model; build the optimizer over "
                         "model->parameters()");
    }

  engine_ = std::make_unique<FsdpEngine>(std::move(built.units), std::move(built.params),
                                         std::move(comms), options_);
  engine_->set_gradient_sync(sync_);
  if (has_units) has_units->units().set_interceptor(engine_.get());
  model_ = std::move(model);
  if (comm_->rank() == 0) log_info(describe_units(engine_->units(), shard_ranks));
  if (comm_->rank() == 0 && options_.quantized_weights)
    log_info(name_ + ": parameters all-gathered in int8 with a scale per 256 values (ZeRO++ qwZ)");
  if (comm_->rank() == 0 && options_.quantized_gradients)
    log_info(name_ + ": gradients reduce-scattered in int8 with a scale per 256 values, by all-to-all (ZeRO++ qgZ)");
  if (comm_->rank() == 0 && engine_->comms().secondary)
    log_info(name_ + ": backward gathers within groups of " + std::to_string(engine_->comms().secondary->size()) +
             " ranks from a second shard kept in forward (ZeRO++ hpZ)");
}

void FsdpStrategy::set_gradient_sync(bool enabled) {
  sync_ = enabled;
  if (engine_) engine_->set_gradient_sync(enabled);
}

bool FsdpStrategy::gradient_sync() const { return sync_; }

void FsdpStrategy::after_backward() {
  require_prepared("after_backward()");
  engine_->after_backward();
}

double FsdpStrategy::grad_norm() {
  require_prepared("grad_norm()");
  // The parameters this rank holds rows of (a chunk's tail rank may hold none).
  std::vector<at::Tensor> shard_grads;
  for (const FsdpParam& p : engine_->params())
    if (p.shard.numel() > 0 && counted_in_grad_norm(p.full)) shard_grads.push_back(p.shard.grad());
  // Replica groups hold the same rows (HYBRID_SHARD).
  return sharded_grad_norm(*comm_, shard_grads,
                           engine_->comms().replica ? engine_->comms().replica->size() : 1);
}

void FsdpStrategy::scale_grads(double factor) {
  require_prepared("scale_grads()");
  for (const FsdpParam& p : engine_->params()) {
    const at::Tensor& g = p.shard.grad();
    if (g.defined()) g.detach().mul_(factor);
  }
}

void FsdpStrategy::warn_unrun_units() {
  if (warned_unrun_) return;
  warned_unrun_ = true;
  std::string names;
  int count = 0;
  for (const FsdpUnit& u : engine_->units())
    if (u.module && !u.managed && count++ < 4) names += (names.empty() ? "" : ", ") + u.name + " (" + u.cls + ")";
  if (count == 0 || comm_->rank() != 0) return;
  if (count > 4) names += " and " + std::to_string(count - 4) + " more";
  log_warn("FSDP: the wrap policy picked " + std::to_string(count) + " unit(s) the model never "
           "ran through units().run: " + names + ". Their parameters stay gathered on every "
           "rank (no memory saved). Run them through units().run, or pick the modules the "
           "model runs that way (docs/fsdp.md)");
}

void FsdpStrategy::step(torch::optim::Optimizer& optimizer) {
  require_prepared("step()");
  warn_unrun_units();
  engine_->before_step();
  optimizer.step();
  // No all-gather of the managed units: the next forward gathers them.
  engine_->refresh_gathered();
}

void FsdpStrategy::zero_grad(torch::optim::Optimizer& optimizer) {
  require_prepared("zero_grad()");
  optimizer.zero_grad();
  engine_->zero_full_grads();
}

Strategy::MemoryAccount FsdpStrategy::memory(torch::optim::Optimizer& optimizer) const {
  require_prepared("memory()");
  MemoryAccount account;
  std::unordered_set<const void*> sharded;
  for (const FsdpUnit& u : engine_->units()) {
    account.param_bytes += bytes_of(u.local);
    if (u.persistent() || u.gathered) account.param_bytes += u.full_bytes;
    account.param_bytes += bytes_of(u.secondary);  // hpZ's part, from forward to backward
  }
  for (const FsdpParam& p : engine_->params()) {
    sharded.insert(p.full.unsafeGetTensorImpl());
    account.grad_bytes += bytes_of(p.shard.grad()) + bytes_of(p.full.grad());
  }
  // Frozen parameters are not sharded: every rank holds them whole.
  std::unordered_set<const void*> seen;
  for (const auto& p : model_->parameters(/*recurse=*/true))
    if (!sharded.count(p.unsafeGetTensorImpl()) && seen.insert(p.unsafeGetTensorImpl()).second)
      account.param_bytes += bytes_of(p);
  account.optimizer_bytes = optimizer_state_bytes(optimizer);
  return account;
}

FsdpInfo FsdpStrategy::info() const {
  require_prepared("info()");
  FsdpInfo info;
  for (const FsdpUnit& u : engine_->units()) {
    FsdpUnitInfo unit;
    unit.name = u.name;
    unit.module_class = u.cls;
    for (size_t p : u.params) unit.numel += engine_->params()[p].full.numel();
    unit.full_bytes = u.full_bytes;
    unit.managed = u.managed;
    unit.gathered = u.gathered;
    info.units.push_back(unit);
    if (u.persistent()) info.resident_full_bytes += u.full_bytes;
    else info.largest_unit_bytes = std::max(info.largest_unit_bytes, u.full_bytes);
  }
  info.shard_group_size = engine_->comms().gather->size();
  info.replica_groups = engine_->comms().replica ? engine_->comms().replica->size() : 1;
  info.iterations = engine_->iterations();
  return info;
}

FsdpEngine& FsdpStrategy::engine() {
  require_prepared("engine()");
  return *engine_;
}

}  // namespace detail

std::unique_ptr<Strategy> make_fsdp_strategy(const FsdpConfig& config,
                                             std::shared_ptr<Communicator> comm, std::string name,
                                             const PrecisionPolicy& precision) {
  return std::make_unique<detail::FsdpStrategy>(config, std::move(comm), std::move(name), precision);
}

FsdpInfo fsdp_info(const Strategy& strategy) {
  const auto* fsdp = dynamic_cast<const detail::FsdpStrategy*>(&strategy);
  MPIACCEL_CHECK(fsdp, "fsdp_info: the strategy '" + strategy.name() +
                           "' holds no FSDP units (not FSDP, or FSDP over one rank, which runs as one process)");
  return fsdp->info();
}

std::vector<std::pair<std::string, at::Tensor>> full_state_dict(Strategy& strategy) {
  auto* fsdp = dynamic_cast<detail::FsdpStrategy*>(&strategy);
  MPIACCEL_CHECK(fsdp, "full_state_dict: the strategy '" + strategy.name() +
                           "' shards nothing (not FSDP, or FSDP over one rank, which runs as one process): "
                           "its model's own parameters are the full state");
  return fsdp->full_state_dict();
}

}  // namespace mpiaccel
