// Accelerator::save_state / load_state: the strategy describes its state as a
// ShardedStateDict, the Checkpointer writes it to one parallel HDF5 file.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/region_rng.hpp"

namespace mpiaccel {
namespace {

std::string bytes_of(const at::Tensor& state) {
  return std::string(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()), static_cast<size_t>(state.numel()));
}

at::Tensor generator_state_of(const std::string& bytes) {
  auto state = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::memcpy(state.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  return state;
}

at::Tensor cpu_rng_state() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

// This rank's random state in a checkpoint: the CPU generator's, then,
// under tensor parallelism, its dropout stream's (RegionRng).
std::string rng_state() {
  std::string bytes = bytes_of(cpu_rng_state());
  const at::Tensor region = RegionRng::state();
  if (region.defined()) bytes += bytes_of(region);
  return bytes;
}

void set_rng_state(const std::string& bytes, bool with_region) {
  const size_t cpu = static_cast<size_t>(cpu_rng_state().numel());
  MPIACCEL_CHECK(bytes.size() >= cpu, "checkpoint: a rank's RNG state is shorter than a CPU generator's");
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(generator_state_of(bytes.substr(0, cpu)));
  }
  if (with_region && bytes.size() > cpu) RegionRng::set_state(generator_state_of(bytes.substr(cpu)));
}

int64_t counter(const std::map<std::string, std::string>& counters, const std::string& key,
                const std::string& path) {
  auto it = counters.find(key);
  MPIACCEL_CHECK(it != counters.end(), "checkpoint " + path + " has no training counter '" + key +
                                           "': it was saved by save_state(step) without a loader; "
                                           "load it with load_state instead of resume");
  return std::stoll(it->second);
}

// A seed for (seed, step, rank) when saved RNG states cannot map onto the new
// ranks: splitmix64 over the three, so nearby inputs give unrelated seeds.
uint64_t derived_seed(uint64_t seed, uint64_t step, uint64_t rank) {
  uint64_t x = seed ^ (step * 0x9E3779B97F4A7C15ULL) ^ (rank * 0xBF58476D1CE4E5B9ULL);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

Checkpointer& Accelerator::checkpointer() {
  if (!checkpointer_)
    checkpointer_ = std::make_unique<Checkpointer>(comm_, config_.checkpoint.dir,
                                                   config_.checkpoint.keep_last);
  return *checkpointer_;
}

std::string Accelerator::save_state(int64_t step, const std::map<std::string, std::string>& trainer) {
  MPIACCEL_CHECK(model_, "Accelerator::save_state before prepare()");
  CheckpointMeta meta;
  meta.step = step;
  meta.world_size = world_size();
  meta.strategy = strategy_->name();
  meta.config_text = config_.to_ini();
  meta.trainer = trainer;
  for (const auto& [key, value] : scaler_->state()) meta.trainer["grad_scaler." + key] = value;
  meta.rng_state = rng_state();
  meta.trainer["mesh"] = mesh_->shape().describe();  // whose RNG states these are
  ShardedStateDict state = strategy_->state_dict(*optimizer_);
  for (const auto& split : splits_) state = split->to_whole(std::move(state));
  return config_.checkpoint.async ? checkpointer().save_async(state, step, meta)
                                  : checkpointer().save(state, step, meta);
}

bool Accelerator::poll_checkpoint() {
  return !checkpointer_ || checkpointer_->poll();
}

void Accelerator::wait_for_checkpoint() {
  if (checkpointer_) checkpointer_->wait();
}

CheckpointMeta Accelerator::load_state(const std::string& path_or_dir) {
  MPIACCEL_CHECK(model_, "Accelerator::load_state before prepare(): prepare the model and "
                         "optimizer first, then load into them");
  auto targets = strategy_->load_targets(*optimizer_);
  for (const auto& split : splits_) targets = split->whole_targets(std::move(targets));
  auto meta = checkpointer().load(path_or_dir, targets);
  for (auto split = splits_.rbegin(); split != splits_.rend(); ++split) (*split)->finish_load();
  strategy_->finish_load(*optimizer_);
  std::map<std::string, std::string> scaler_state;
  for (const auto& [key, value] : meta.trainer)
    if (key.rfind("grad_scaler.", 0) == 0) scaler_state[key.substr(12)] = value;
  if (!scaler_state.empty()) scaler_->load_state(scaler_state);
  // Each rank's saved states fit only the same ranks in the same mesh (a
  // checkpoint from before the mesh was recorded had no tensor parallelism).
  const auto saved_mesh = meta.trainer.find("mesh");
  const bool tp = mesh_->shape().size("tp") > 1;
  const bool same_mesh = saved_mesh != meta.trainer.end() ? saved_mesh->second == mesh_->shape().describe() : !tp;
  if (meta.world_size == world_size() && same_mesh && !meta.rng_state.empty()) {
    set_rng_state(meta.rng_state, tp);
  } else {
    // By data-parallel rank, as set_seed: the ranks of a tp group draw alike.
    const auto dp_rank = static_cast<uint64_t>(mesh_->dp()->rank());
    const uint64_t seed = derived_seed(static_cast<uint64_t>(config_.distributed.seed),
                                       static_cast<uint64_t>(meta.step), dp_rank);
    torch::manual_seed(seed);
    if (tp) RegionRng::seed(seed, static_cast<int64_t>(dp_rank), mesh_->tp()->rank(), at::Device(device()));
    if (is_main_process())
      log_info("checkpoint " + meta.path + " was saved by " + std::to_string(meta.world_size) + " rank(s)" +
               (saved_mesh != meta.trainer.end() ? " (" + saved_mesh->second + ")" : "") + ", this run has " +
               std::to_string(world_size()) + " (" + mesh_->shape().describe() +
               "): RNG states re-derived from (seed, step, data-parallel rank)");
  }
  return meta;
}

std::string Accelerator::save_state(int64_t step, const DistributedLoader& loader) {
  const LoaderState where = loader.state();
  // The data-parallel ranks (the sampler's world) each took a batch.
  const int64_t global_batch = loader.batch_size() * config_.train.grad_accum_steps * loader.sampler().world_size();
  return save_state(step, {{"step", std::to_string(step)},
                           {"scheduler_step", std::to_string(step)},
                           {"epoch", std::to_string(where.epoch)},
                           {"position", std::to_string(where.position)},
                           {"samples_seen", std::to_string(step * global_batch)}});
}

int64_t Accelerator::resume(DistributedLoader& loader) {
  MPIACCEL_CHECK(model_, "Accelerator::resume before prepare(): prepare the model and "
                         "optimizer first, then resume into them");
  const ResumeFrom from = resume_from(config_.checkpoint);
  const std::string source = from.kind == ResumeFrom::Kind::Latest ? checkpointer().latest_source() : from.path;
  if (source.empty()) {
    if (from.kind == ResumeFrom::Kind::Latest)
      print("resume = latest: no checkpoint in " + config_.checkpoint.dir + " yet, starting from step 0");
    return 0;
  }
  const CheckpointMeta meta = load_state(source);
  loader.restore(LoaderState{counter(meta.trainer, "epoch", meta.path),
                             counter(meta.trainer, "position", meta.path)});
  const int64_t step = counter(meta.trainer, "step", meta.path);
  print("resumed from " + meta.path + " at step " + std::to_string(step) + " (saved by " +
        std::to_string(meta.world_size) + " rank(s), strategy " + meta.strategy + ")");
  return step;
}

bool Accelerator::preemption_agreed() {
  return comm_->all_reduce_int(preemption_requested() ? 1 : 0, ReduceOp::Max) > 0;
}

}  // namespace mpiaccel
