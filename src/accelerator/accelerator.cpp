#include "mpiaccel/accelerator.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <unordered_set>

#include "accelerator/accelerator_mesh.hpp"
#include "strategies/run_strategy.hpp"
#include "mpiaccel/activation_checkpointing.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/region_rng.hpp"

namespace mpiaccel {

namespace {
std::chrono::milliseconds timeout_of(const Config& config) {
  return std::chrono::milliseconds(static_cast<int64_t>(config.distributed.timeout_s * 1000.0));
}
}  // namespace

Accelerator::Accelerator(Runtime& runtime, Config config)
    : runtime_(runtime), config_(std::move(config)) {
  set_log_level(config_.logging.level);
  runtime_.set_device_options({config_.distributed.allow_gpu_sharing, config_.distributed.device});
  // NCCL, MPI, or MPI with device<->host staging; a device or backend some
  // rank cannot have fails on every rank.
  comm_ = make_world(runtime_, config_.distributed.backend, timeout_of(config_));
  mesh_ = detail::make_mesh(config_, runtime_, comm_);
  precision_ = PrecisionPolicy::from_config(config_.distributed);
  bool one_process = false;
  strategy_ = detail::make_run_strategy(resolve_strategy(config_, detail::data_parallel_shape(mesh_->shape())),
                                        precision_, mesh_->gradient_group(), &one_process);
  if (one_process && rank() == 0)
    log_info("[distributed] strategy = " + strategy_->name() + " over one data-parallel rank: nothing to shard, "
          "so it runs as one process does (no gathers or reduce-scatters) and saves the same checkpoint");
  MPIACCEL_CHECK(!(precision_.needs_grad_scaler() &&
                   (strategy_kind(config_) == StrategyKind::Zero1 ||
                    strategy_kind(config_) == StrategyKind::Zero2)),
                 "fp16 with ZeRO stage 1/2 is not supported yet (its sharded gradients are "
                 "attached inside the step, after loss unscaling): use bf16, or ZeRO stage 3 / fsdp");
  GradScalerOptions scaler_options;
  scaler_options.enabled = precision_.needs_grad_scaler();
  // The found-inf flag lives where the gradients are (the staged MPI
  // communicator carries device tensors too).
  scaler_ = std::make_unique<GradScaler>(scaler_options, comm_, device());
  // The checkpointer duplicates comm_'s MPI communicator for its files: made
  // now, while no operation of comm_ can be in flight.
  if (!config_.checkpoint.dir.empty()) checkpointer();
  log_debug("accelerator: strategy " + strategy_->name() + " over " +
            std::to_string(comm_->size()) + " rank(s), device " + device());
}

Accelerator::~Accelerator() {
  // The interceptor must leave the model before it is destroyed.
  if (checkpointing_ && model_) disable_activation_checkpointing(*model_, *checkpointing_);
}

int Accelerator::rank() const { return comm_->rank(); }
int Accelerator::world_size() const { return comm_->size(); }
std::string Accelerator::device() const { return runtime_.device().device; }

void Accelerator::set_seed(uint64_t seed, bool device_specific) {
  const auto dp_rank = static_cast<uint64_t>(mesh_->dp()->rank());  // the world rank without tp
  torch::manual_seed(device_specific ? seed + dp_rank : seed);
  if (!device_specific) return;
  if (mesh_->shape().size("tp") > 1)
    RegionRng::seed(seed, static_cast<int64_t>(dp_rank), mesh_->tp()->rank(), at::Device(device()));
  else
    RegionRng::set_state({});  // no stream of an earlier run in this process
}

void Accelerator::prepare(std::shared_ptr<torch::nn::Module> model,
                          std::shared_ptr<torch::optim::Optimizer> optimizer) {
  MPIACCEL_CHECK(model && optimizer, "Accelerator::prepare needs a model and an optimizer");
  MPIACCEL_CHECK(!model_, "Accelerator::prepare was already called: call it once per run");
  check_splits();
  model_ = std::move(model);
  optimizer_ = std::move(optimizer);
  // Module::to() swaps each parameter's data in place, so the optimizer,
  // built over the same tensors, follows the move.
  count_each_parameter_once();
  if (!at::Device(device()).is_cpu()) model_->to(at::Device(device()));
  strategy_->prepare(model_, optimizer_);
  // After the strategy: it wraps FSDP's interceptor, so recomputation happens
  // with the unit's parameters gathered.
  checkpointing_ = enable_activation_checkpointing(*model_, config_);
}

void Accelerator::add_split(std::shared_ptr<ModelSplit> split) {
  MPIACCEL_CHECK(split, "Accelerator::add_split: no split");
  MPIACCEL_CHECK(!model_, "Accelerator::add_split after prepare(): split the model first (parallelize)");
  for (const auto& added : splits_)
    MPIACCEL_CHECK(std::string(added->dimension()) != split->dimension(),
                   std::string("Accelerator::add_split: the model is split over ") + split->dimension() + " already");
  splits_.push_back(std::move(split));
}

// Every mesh dimension that splits the model has its split: otherwise the
// gradient norm and the checkpoints would see one rank's part as the model.
void Accelerator::check_splits() const {
  for (const char* dimension : {"tp", "pp"}) {
    const int64_t ranks = mesh_->shape().size(dimension);
    if (ranks == 1) continue;
    bool found = false;
    for (const auto& split : splits_) found = found || std::string(split->dimension()) == dimension;
    MPIACCEL_CHECK(found, "[parallelism] " + std::string(dimension == std::string("tp") ? "tp_size " : "pp_size ") +
                              std::to_string(ranks) + ", but the model was not split over " + dimension +
                              " before prepare: split it with parallelize (include/mpiaccel/parallelize.hpp)");
  }
}

// The gradient norm counts every parameter of the model once: each split
// says which of this rank's it counts (a parameter every rank of a tp group
// holds whole counts on the group's first rank; one that two pipeline stages
// hold, a tied embedding, on the lower stage).
void Accelerator::count_each_parameter_once() {
  if (splits_.empty()) return;
  strategy_->count_in_grad_norm([splits = splits_](const at::Tensor& param) {
    for (const auto& split : splits)
      if (!split->counts_in_grad_norm(param)) return false;
    return true;
  });
}

AutocastGuard Accelerator::autocast() const { return AutocastGuard(device(), precision_.param_dtype); }

DistributedLoader Accelerator::make_loader(std::shared_ptr<const Dataset> dataset,
                                           int64_t batch_size, bool shuffle) const {
  const TrainConfig& train = config_.train;
  if (train.split_batches) {
    const int64_t ranks = mesh_->dp()->size();
    MPIACCEL_CHECK(batch_size % ranks == 0,
                   "[train] split_batches: batch_size " + std::to_string(batch_size) +
                       " is the global batch and does not divide by the " + std::to_string(ranks) +
                       " ranks; set batch_size to a multiple of " + std::to_string(ranks) +
                       " or split_batches = false");
    batch_size /= ranks;
  }
  // Every rank of a data-parallel group's peers (later: its tp ranks)
  // reads the same samples: the sampler splits over the dp group only.
  const std::shared_ptr<Communicator> dp = mesh_->dp();
  DistributedSampler sampler(dataset->size(), dp->rank(), dp->size(),
                             static_cast<uint64_t>(config_.distributed.seed), shuffle,
                             train.drop_last);
  LoaderOptions options;
  options.num_workers = train.num_workers;
  options.prefetch_factor = train.prefetch_factor;
  options.pin_memory = train.pin_memory;
  options.non_blocking = train.non_blocking;
  return DistributedLoader(std::move(dataset), std::move(sampler), batch_size, device(), options);
}

Accelerator::AccumulateGuard Accelerator::accumulate() {
  ++micro_step_;
  sync_gradients_ = micro_step_ % config_.train.grad_accum_steps == 0;
  strategy_->set_gradient_sync(sync_gradients_);
  return AccumulateGuard(*this);
}

Accelerator::AccumulateGuard::~AccumulateGuard() = default;

Accelerator::NoSyncGuard::NoSyncGuard(Strategy& strategy)
    : strategy_(&strategy), previous_(strategy.gradient_sync()) {
  strategy_->set_gradient_sync(false);
}
Accelerator::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : strategy_(other.strategy_), previous_(other.previous_) {
  other.strategy_ = nullptr;
}
Accelerator::NoSyncGuard::~NoSyncGuard() {
  if (strategy_) strategy_->set_gradient_sync(previous_);
}

Accelerator::NoSyncGuard Accelerator::no_sync() { return NoSyncGuard(*strategy_); }

void Accelerator::backward(const at::Tensor& loss) {
  MPIACCEL_CHECK(model_, "Accelerator::backward before prepare()");
  const auto steps = config_.train.grad_accum_steps;
  auto scaled = scaler_->scale(loss);
  if (steps > 1)
    (scaled / static_cast<double>(steps)).backward();
  else
    scaled.backward();
  strategy_->after_backward();
}

double Accelerator::clip_grad_norm(double max_norm) {
  if (!sync_gradients_) return 0.0;
  if (scaler_->enabled() && !scaler_->unscaled()) scaler_->unscale_(optimizer_grads(*optimizer_));
  double norm = strategy_->grad_norm();
  // Each rank of a split covers its part (a tp rank its slices, and on the
  // first the whole parameters; a pipeline rank its stages): the group's sum
  // of squares is the model's.
  for (const auto& split : splits_) norm = std::sqrt(split->group().all_reduce_scalar(norm * norm, ReduceOp::Sum));
  // torch.nn.utils.clip_grad_norm_: scale only when over the limit, with the
  // same 1e-6 guard against a zero norm.
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm)
    strategy_->scale_grads(max_norm / (norm + 1e-6));
  return norm;
}

void Accelerator::step() {
  if (!sync_gradients_) return;
  if (!scaler_->enabled()) {
    strategy_->step(*optimizer_);
    return;
  }
  if (!scaler_->unscaled()) scaler_->unscale_(optimizer_grads(*optimizer_));
  scaler_->step([&] { strategy_->step(*optimizer_); });
  scaler_->update();
}

void Accelerator::zero_grad() {
  if (sync_gradients_) strategy_->zero_grad(*optimizer_);
}

at::Tensor Accelerator::gather(const at::Tensor& tensor) {
  auto input = tensor.contiguous();
  auto sizes = input.sizes().vec();
  if (sizes.empty()) {
    input = input.reshape({1});
    sizes = {1};
  }
  std::vector<int64_t> rows_of_rank(static_cast<size_t>(world_size()));
  auto row_counts = at::zeros({world_size()}, at::kLong);
  row_counts[rank()] = sizes[0];
  comm_->all_reduce(row_counts, ReduceOp::Sum);
  const int64_t row_elements = sizes[0] == 0 ? 0 : input.numel() / sizes[0];
  std::vector<int64_t> counts;
  int64_t total_rows = 0;
  for (int r = 0; r < world_size(); ++r) {
    int64_t rows = row_counts[r].item<int64_t>();
    counts.push_back(rows * row_elements);
    total_rows += rows;
  }
  auto out_sizes = sizes;
  out_sizes[0] = total_rows;
  auto output = at::empty(out_sizes, input.options());
  comm_->all_gather_uneven(output, input, counts);
  return output;
}

at::Tensor Accelerator::reduce(const at::Tensor& tensor, ReduceOp op) {
  auto result = tensor.clone().contiguous();
  comm_->all_reduce(result, op);
  return result;
}

double Accelerator::mean_across_ranks(double value) {
  return comm_->all_reduce_scalar(value, ReduceOp::Sum) / world_size();
}

void Accelerator::wait_for_everyone() { comm_->barrier(); }

void Accelerator::print(const std::string& message) const { mpiaccel::print(message); }

}  // namespace mpiaccel
