#pragma once
// The facade a training program calls, shaped like Hugging Face Accelerate:
//
//   mpiaccel::Runtime runtime(&argc, &argv);
//   mpiaccel::Accelerator acc(runtime, mpiaccel::Config::load_file("job.ini"));
//   acc.set_seed(42);
//   auto model = std::make_shared<MyModel>();
//   auto opt = std::make_shared<torch::optim::AdamW>(model->parameters(), ...);
//   acc.prepare(model, opt);
//   auto loader = acc.make_loader(dataset, batch_size);
//   for (step...) {
//     for (micro...) {
//       auto guard = acc.accumulate();          // syncs only on the last micro-step
//       auto batch = loader.next();
//       acc.backward(model->loss(model->forward(batch.input), batch.target));
//     }
//     acc.clip_grad_norm(1.0);
//     acc.step();
//     acc.zero_grad();
//   }
//
// Every member marked collective must be called by every rank, in the same
// order.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/mesh.hpp"
#include "mpiaccel/model_split.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/strategy.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace mpiaccel {

class Runtime;
class ActivationCheckpointing;

class Accelerator {
 public:
  /// Builds the world communicator (deadline [distributed] timeout_s) and the
  /// strategy of `config`. Collective over the world.
  Accelerator(Runtime& runtime, Config config);
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  const Config& config() const { return config_; }
  Runtime& runtime() { return runtime_; }
  Communicator& comm() { return *comm_; }
  Strategy& strategy() { return *strategy_; }
  /// The job's device mesh ([parallelism]): the strategy runs over its
  /// data-parallel group, and the loader gives each data-parallel rank its share.
  Mesh& mesh() { return *mesh_; }
  int rank() const;
  int world_size() const;
  bool is_main_process() const { return rank() == 0; }
  /// "cpu" or "cuda:N".
  std::string device() const;

  /// Seeds LibTorch's generators. With `device_specific`, data-parallel rank
  /// r uses seed + r (for dropout masks that must differ; the ranks of one
  /// tensor-parallel group draw alike, and each has its own stream inside
  /// parallel regions: RegionRng, region_rng.hpp); otherwise every rank the same seed
  /// (for identical model initialisation).
  void set_seed(uint64_t seed, bool device_specific = false);

  /// Puts the model and its optimizer under the strategy (see
  /// Strategy::prepare). Call once, after set_seed. With [parallelism]
  /// tp_size or pp_size > 1 the model must be split already, its splits
  /// added (parallelize does both: include/mpiaccel/parallelize.hpp): the
  /// strategy runs on each rank's part, the gradient norm counts every
  /// parameter once, and checkpoints hold every tensor whole. Collective.
  void prepare(std::shared_ptr<torch::nn::Module> model,
               std::shared_ptr<torch::optim::Optimizer> optimizer);

  /// A loader of `dataset` whose sampler gives this rank its disjoint share:
  /// `batch_size` samples per rank per micro-step (with [train] split_batches,
  /// `batch_size` is the global batch, divided by the data-parallel size), delivered
  /// on device() with the [train] loader options (num_workers, prefetch_factor,
  /// pin_memory, non_blocking).
  DistributedLoader make_loader(std::shared_ptr<const Dataset> dataset, int64_t batch_size,
                                bool shuffle = true) const;

  /// Opens one micro-step of gradient accumulation ([train]
  /// grad_accum_steps): gradients synchronise only on the last one, and
  /// step()/zero_grad() act only then.
  class AccumulateGuard {
   public:
    explicit AccumulateGuard(Accelerator& acc) : acc_(&acc) {}
    AccumulateGuard(AccumulateGuard&& other) noexcept : acc_(other.acc_) { other.acc_ = nullptr; }
    AccumulateGuard(const AccumulateGuard&) = delete;
    ~AccumulateGuard();

   private:
    Accelerator* acc_;
  };
  AccumulateGuard accumulate();

  /// Disables gradient synchronisation until the guard is destroyed
  /// (PyTorch's DDP.no_sync()).
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(Strategy& strategy);
    NoSyncGuard(NoSyncGuard&& other) noexcept;
    NoSyncGuard(const NoSyncGuard&) = delete;
    ~NoSyncGuard();

   private:
    Strategy* strategy_;
    bool previous_;
  };
  NoSyncGuard no_sync();

  /// Computes in the policy's param_dtype ([distributed] mixed_precision)
  /// until destroyed: wrap forward and loss, not backward.
  AutocastGuard autocast() const;
  const PrecisionPolicy& precision() const { return precision_; }
  /// The fp16 loss scaler (disabled, scale 1, for fp32 and bf16).
  const GradScaler& grad_scaler() const { return *scaler_; }
  GradScaler& grad_scaler() { return *scaler_; }

  /// loss.backward(), with the loss scaled (fp16) and divided by the
  /// accumulation steps so that accumulated gradients are a mean. Collective
  /// (hooks communicate).
  void backward(const at::Tensor& loss);

  /// Clips the gradients to a global L2 norm of `max_norm` and returns the
  /// norm before clipping. Collective. Only on a sync step.
  double clip_grad_norm(double max_norm);

  /// The optimizer step (only on a sync step). With fp16 the gradients are
  /// unscaled first and, if any rank found inf/nan, every rank skips the step
  /// and the scale backs off. Collective.
  void step();
  void zero_grad();

  /// Every rank's `tensor` concatenated along dim 0, on every rank. Collective.
  at::Tensor gather(const at::Tensor& tensor);
  /// The reduction of every rank's `tensor`, on every rank. Collective.
  at::Tensor reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum);
  /// The mean of a scalar over ranks. Collective.
  double mean_across_ranks(double value);

  /// A barrier. Collective.
  void wait_for_everyone();
  /// Writes `message` from rank 0 only.
  void print(const std::string& message) const;

  /// Saves a checkpoint of `step` into [checkpoint] dir: model parameters
  /// and buffers, optimizer state, this rank's RNG state, the resolved config
  /// and `trainer` (counters such as epoch and sample position). Returns the
  /// committed file. A failed save leaves the previous checkpoint and
  /// `latest` untouched. With [checkpoint] async (the default) the file is
  /// written in the background after a copy into host memory: call
  /// poll_checkpoint() at step boundaries and wait_for_checkpoint() before
  /// exiting. Collective.
  std::string save_state(int64_t step, const std::map<std::string, std::string>& trainer = {});
  /// At a step boundary: takes the result of a background save that every
  /// rank has finished (its error is thrown on every rank); true when none
  /// is in flight any more. Collective while a save is in flight.
  bool poll_checkpoint();
  /// Waits for a background save and throws its error on every rank.
  /// Collective.
  void wait_for_checkpoint();
  /// Loads a checkpoint file, or a directory's `latest`, into the prepared
  /// model and optimizer, at any world size and layout (each rank reads only
  /// the rows it needs). RNG states are restored when the world size is the
  /// same; otherwise they are re-derived from (seed, step, rank) and this is
  /// logged. Returns the checkpoint's meta (step, trainer counters).
  /// Collective.
  CheckpointMeta load_state(const std::string& path_or_dir);

  /// save_state with the training counters a resume needs: `step` and the
  /// position of `loader` in its data (epoch, samples consumed), so that
  /// resume() continues with the very next batch, at any world size.
  /// Collective.
  std::string save_state(int64_t step, const DistributedLoader& loader);
  /// Loads the checkpoint [checkpoint] resume names — none: nothing;
  /// latest: DIR/latest if DIR holds a committed checkpoint (a requeued
  /// job's first run has none: nothing); a path: that checkpoint — and moves
  /// `loader` to where the saved run was. Returns the step to continue from
  /// (0 when nothing was loaded). Collective.
  int64_t resume(DistributedLoader& loader);
  /// True on every rank when SIGUSR1 or SIGTERM (a pre-emption notice)
  /// reached any rank: then save_state and return kExitPreempted (3).
  /// Collective (one all-reduce): call it at a step boundary.
  bool preemption_agreed();

  /// Adds a split of the model over a mesh dimension (model_split.hpp),
  /// before prepare(): the step's gradient norm and the checkpoints go
  /// through it, in the order the splits were added. The parallelize step
  /// adds them (include/mpiaccel/parallelize.hpp).
  void add_split(std::shared_ptr<ModelSplit> split);
  /// The splits added, in order.
  const std::vector<std::shared_ptr<ModelSplit>>& splits() const { return splits_; }

  std::shared_ptr<torch::nn::Module> model() const { return model_; }
  std::shared_ptr<torch::optim::Optimizer> optimizer() const { return optimizer_; }

 private:
  friend class AccumulateGuard;
  Checkpointer& checkpointer();
  void check_splits() const;
  void count_each_parameter_once();

  Runtime& runtime_;
  Config config_;
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<Mesh> mesh_;
  std::unique_ptr<Strategy> strategy_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::vector<std::shared_ptr<ModelSplit>> splits_;  ///< tensor, then pipeline
  PrecisionPolicy precision_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<ActivationCheckpointing> checkpointing_;
  std::shared_ptr<torch::nn::Module> model_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  int64_t micro_step_ = 0;
  bool sync_gradients_ = true;
};

}  // namespace mpiaccel
