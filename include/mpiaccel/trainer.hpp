#pragma once
// The built-in trainer behind `mpiaccel train` (the Transformers Trainer
// counterpart): builds the model, data, optimizer and schedule from the
// config, runs the loop through an Accelerator, evaluates, logs to the
// terminal and to the JSONL metrics file, and prints a text sample at the end
// of a GPT run.

#include <cstdint>
#include <vector>

namespace mpiaccel {

class Accelerator;

/// Exit statuses of `mpiaccel train` (docs/trainer.md).
constexpr int kExitFinished = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
/// SIGUSR1 or SIGTERM reached a rank: every rank took part in a checkpoint at
/// the next step boundary and stopped. Requeue the job with
/// `checkpoint.resume=latest` (jobs/slurm/*.sbatch do).
constexpr int kExitPreempted = 3;

/// What a run did, for the caller and tests.
struct TrainResult {
  int64_t steps = 0;
  std::vector<double> losses;  ///< per optimizer step, mean over ranks and micro-batches
  double final_val_loss = 0;
  double final_val_acc = -1;   ///< classification only
  int exit_status = kExitFinished;
};

/// Runs the configured training. Collective over the accelerator's world.
TrainResult train(Accelerator& accelerator);

}  // namespace mpiaccel
