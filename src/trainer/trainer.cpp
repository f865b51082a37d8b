// mpiaccel::Trainer: the training loop of docs/trainer.md over any model.

#include "mpiaccel/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/parallelize.hpp"
#include "mpiaccel/pipeline.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/activity.hpp"
#include "runtime/trace.hpp"
#include "trainer/evaluation.hpp"
#include "trainer/lr_schedule.hpp"
#include "trainer/run_report.hpp"
#include "optim/optimizer_factory.hpp"
#include "trainer/builtin_model.hpp"
#include "trainer/progress.hpp"
#include "trainer/trace_writer.hpp"
#include "trainer/watchdog.hpp"

namespace mpiaccel {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string at_step(int64_t step, const char* phase) {
  return "step " + std::to_string(step) + ": " + phase;
}

// Fault injection for the hang-watchdog test: MPIACCEL_TEST_STALL=RANK:STEP:SECONDS
// makes that rank sleep before the forward pass of that (1-based) step.
void maybe_inject_stall(int rank, int64_t step) {
  const char* spec = std::getenv("MPIACCEL_TEST_STALL");
  if (!spec) return;
  int stall_rank = -1;
  long long stall_step = -1, seconds = 0;
  if (std::sscanf(spec, "%d:%lld:%lld", &stall_rank, &stall_step, &seconds) != 3) return;
  if (stall_rank != rank || stall_step != step) return;
  detail::set_activity("step " + std::to_string(step) + ": injected stall (MPIACCEL_TEST_STALL)");
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

}  // namespace

Trainer::Trainer(Accelerator& accelerator, std::shared_ptr<torch::nn::Module> model, Forward forward)
    : acc_(accelerator), model_(std::move(model)), forward_(std::move(forward)) {
  MPIACCEL_CHECK(model_ != nullptr, "Trainer: no model");
}

Trainer::~Trainer() = default;

Trainer& Trainer::loss(Loss loss) {
  loss_ = std::move(loss);
  return *this;
}
Trainer& Trainer::step_loss(StepLoss step) {
  step_loss_ = std::move(step);
  return *this;
}
Trainer& Trainer::optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer) {
  optimizer_ = std::move(optimizer);
  return *this;
}
Trainer& Trainer::optimizer_factory(OptimizerFactory factory) {
  optimizer_factory_ = std::move(factory);
  return *this;
}
Trainer& Trainer::parallel_plan(ParallelPlan plan) {
  plan_ = std::move(plan);
  return *this;
}
Trainer& Trainer::train_data(std::shared_ptr<const Dataset> data) {
  train_data_ = std::move(data);
  return *this;
}
Trainer& Trainer::eval_data(std::shared_ptr<const Dataset> data) {
  eval_data_ = std::move(data);
  return *this;
}
Trainer& Trainer::metric(EvalMetric metric) {
  metrics_.push_back(std::move(metric));
  return *this;
}
Trainer& Trainer::throughput_unit(std::string unit, int64_t per_sample) {
  unit_ = std::move(unit);
  units_per_sample_ = per_sample;
  return *this;
}
Trainer& Trainer::text_at_end(std::string tag, TextHook hook) {
  text_tag_ = std::move(tag);
  text_at_end_ = std::move(hook);
  return *this;
}

Trainer& Trainer::at_end(EndHook hook) {
  at_end_ = std::move(hook);
  return *this;
}

// One run of train(): what the steps share.
struct Trainer::Loop {
  Trainer& t;
  Accelerator& acc;
  const Config& config;
  const TrainConfig& tc;
  StepLoss step;
  DistributedLoader loader;
  std::unique_ptr<DistributedLoader> eval_loader;
  int64_t eval_batches = 0;
  int64_t units_per_step = 0;
  std::string unit_per_s;      // progress line: "tok/s", "samples/s"
  std::string throughput_key;  // metrics file: "tokens_per_s", "samples_per_s"
  detail::RunReport report;
  detail::Progress progress;
  TrainResult result;
  int64_t last_saved = 0;
  std::string committed;  // a background save not yet committed
  Clock::time_point start = Clock::now();
  Clock::time_point window_start = start;
  int64_t window_steps = 0;
  double window_loss = 0;

  Loop(Trainer& trainer, StepLoss step_loss)
      : t(trainer),
        acc(trainer.acc_),
        config(trainer.acc_.config()),
        tc(config.train),
        step(std::move(step_loss)),
        loader(acc.make_loader(t.train_data_, tc.batch_size, /*shuffle=*/true)),
        units_per_step(t.units_per_sample_ * loader.batch_size() * tc.grad_accum_steps * loader.sampler().world_size()),
        unit_per_s(t.unit_ + "/s"),
        throughput_key((t.unit_ == "tok" ? std::string("tokens") : t.unit_) + "_per_s"),
        report(config.logging, acc.is_main_process()),
        progress(config.logging.progress, acc.is_main_process()) {
    if (t.eval_data_) {
      eval_loader = std::make_unique<DistributedLoader>(acc.make_loader(t.eval_data_, tc.batch_size, false));
      eval_batches = std::min<int64_t>(tc.eval_batches, std::max<int64_t>(1, eval_loader->batches_per_epoch()));
    }
  }

  void save(int64_t steps_done) {
    if (!committed.empty()) finish_saving();  // at most one in flight
    detail::set_activity(at_step(steps_done, "checkpoint save"));
    detail::TraceScope span("checkpoint save", detail::TraceLane::Io);
    const std::string path = acc.save_state(steps_done, loader);
    last_saved = steps_done;
    if (!config.checkpoint.async) {
      progress.message("checkpoint " + path);
      return;
    }
    committed = path;
    progress.message("checkpoint " + path + " (writing in the background)");
  }

  // Waits for a background save to commit.
  void finish_saving() {
    detail::set_activity("waiting for the background checkpoint save");
    acc.wait_for_checkpoint();
    if (!committed.empty()) progress.message("checkpoint " + committed + " committed");
    committed.clear();
  }

  // Forward, backward and the optimizer step of global step `n` (1-based);
  // returns this rank's loss, the mean over the micro-batches.
  double train_step(int64_t n, double& grad_norm) {
    const double loss = pipeline_of(acc) ? pipeline_forward_backward(n) : forward_backward(n);
    detail::set_activity(at_step(n, "optimizer step"));
    detail::TraceScope span("optimizer step");
    if (config.optimizer.grad_clip > 0) grad_norm = acc.clip_grad_norm(config.optimizer.grad_clip);
    acc.step();
    acc.zero_grad();
    return loss;
  }

  // The step's grad_accum_steps batches, one after another through the
  // model; returns this rank's loss, the mean over them.
  double forward_backward(int64_t n) {
    // Summed where the loss lives and read once the step is queued: on a GPU
    // a read per micro-step would stall the host before every optimizer step.
    at::Tensor step_loss;
    for (int64_t micro = 0; micro < tc.grad_accum_steps; ++micro) {
      auto guard = acc.accumulate();
      detail::set_activity(at_step(n, "waiting for the next batch"));
      const Batch batch = loader.next();
      at::Tensor loss;
      {
        detail::set_activity(at_step(n, "forward"));
        detail::TraceScope span("forward");
        auto autocast = acc.autocast();
        loss = step(batch).loss;
      }
      {
        detail::set_activity(at_step(n, "backward (and gradient reduction)"));
        detail::TraceScope span("backward");
        acc.backward(loss);
      }
      step_loss = step_loss.defined() ? step_loss + loss.detach() : loss.detach();
    }
    return step_loss.item<double>() / static_cast<double>(tc.grad_accum_steps);
  }

  // The step's grad_accum_steps batches together, cut into the pipeline's
  // microbatches (the same samples as without a pipeline).
  double pipeline_forward_backward(int64_t n) {
    std::vector<at::Tensor> inputs, targets;
    for (int64_t micro = 0; micro < tc.grad_accum_steps; ++micro) {
      detail::set_activity(at_step(n, "waiting for the next batch"));
      const Batch batch = loader.next();
      inputs.push_back(batch.input);
      targets.push_back(batch.target);
    }
    return pipeline_of(acc)->train_step(at::cat(inputs), at::cat(targets));
  }

  void restart_window() {
    window_start = Clock::now();
    window_steps = 0;
    window_loss = 0;
  }

  void log_step(int64_t n, double mean_loss, double lr, double grad_norm) {
    window_loss += mean_loss;
    ++window_steps;
    const bool log_now = n == tc.max_steps || (tc.log_every > 0 && n % tc.log_every == 0);
    const double window_s = seconds_since(window_start);
    detail::ProgressState state;
    state.step = n;
    state.max_steps = tc.max_steps;
    state.loss = mean_loss;
    state.lr = lr;
    state.unit = unit_per_s.c_str();
    state.elapsed_s = seconds_since(start);
    state.steps_per_s = window_s > 0 ? window_steps / window_s : 0;
    state.throughput = state.steps_per_s * static_cast<double>(units_per_step);
    if (log_now) {
      state.loss = window_loss / static_cast<double>(window_steps);
      std::vector<std::pair<std::string, double>> values = {{"loss", mean_loss}, {"lr", lr}, {"grad_norm", grad_norm}};
      if (acc.grad_scaler().enabled()) values.emplace_back("loss_scale", acc.grad_scaler().scale());
      values.emplace_back("elapsed_s", state.elapsed_s);
      values.emplace_back(throughput_key, state.throughput);
      report.record(n, values);
    }
    progress.update(state, log_now);
    if (log_now) restart_window();
  }

  void evaluate(int64_t n) {
    detail::set_activity(at_step(n, "evaluation"));
    detail::TraceScope span("evaluation");
    const auto eval = detail::evaluate(acc, *t.model_, step, t.metrics_, *eval_loader, eval_batches);
    result.final_val_loss = eval.loss;
    result.final_metrics = eval.metrics;
    auto it = eval.metrics.find("val_acc");
    result.final_val_acc = it == eval.metrics.end() ? -1 : it->second;
    std::vector<std::pair<std::string, double>> values = {{"val_loss", eval.loss},
                                                          {"elapsed_s", seconds_since(start)}};
    std::string text = "eval step " + std::to_string(n) + ": val_loss " + std::to_string(eval.loss);
    for (const auto& [name, value] : eval.metrics) {
      values.emplace_back(name, value);
      text += ", " + name + " " + std::to_string(value);
    }
    report.record(n, values);
    progress.message(text);
    restart_window();  // evaluation time is not training throughput
  }

  // Returns false when the run stops here (pre-empted).
  bool after_step(int64_t n, bool preempted) {
    const bool checkpointing = !config.checkpoint.dir.empty();
    // A background save's result, at the step boundary after it finished.
    if (checkpointing && acc.poll_checkpoint() && !committed.empty()) {
      progress.message("checkpoint " + committed + " committed");
      committed.clear();
    }
    if (eval_loader && (n == tc.max_steps || (tc.eval_every > 0 && n % tc.eval_every == 0))) evaluate(n);
    if (preempted) {
      // Every rank saw the flag in the same all-reduce: all save, all stop,
      // once the save is committed.
      if (checkpointing) {
        save(n);
        finish_saving();
      }
      progress.message("pre-empted (SIGUSR1/SIGTERM) after step " + std::to_string(n) +
                       (checkpointing ? ": checkpoint saved; restart with checkpoint.resume=latest"
                                      : ": no [checkpoint] dir, nothing saved"));
      result.exit_status = kExitPreempted;
      return false;
    }
    if (checkpointing && config.checkpoint.every_steps > 0 && n % config.checkpoint.every_steps == 0) save(n);
    return true;
  }

  void run(torch::optim::Optimizer& optimizer) {
    const int64_t first_step = acc.resume(loader);
    report.start(first_step, config.to_ini());
    last_saved = first_step;
    result.steps = first_step;
    if (!config.logging.trace.empty()) {
      acc.wait_for_everyone();  // a common time origin for every rank's spans
      detail::Tracer::instance().enable(Clock::now());
    }
    start = window_start = Clock::now();
    for (int64_t s = first_step; s < tc.max_steps; ++s) {
      const int64_t n = s + 1;
      const double lr = detail::learning_rate_at(s, tc.max_steps, config.optimizer.lr, config.scheduler);
      detail::set_learning_rate(optimizer, lr);
      maybe_inject_stall(acc.rank(), n);
      double grad_norm = 0;
      const double rank_loss = train_step(n, grad_norm);
      // One all-reduce per step carries the loss and the pre-emption flag. The
      // logged loss is the mean over ranks and micro-batches, so runs at
      // different world sizes compare directly (docs/design.md, "Run outputs").
      detail::set_activity(at_step(n, "loss and pre-emption all-reduce"));
      auto totals = at::tensor({rank_loss, preemption_requested() ? 1.0 : 0.0}, at::kDouble);
      acc.comm().all_reduce(totals, ReduceOp::Sum);
      const double mean_loss = totals[0].item<double>() / acc.world_size();
      result.losses.push_back(mean_loss);
      result.steps = n;
      log_step(n, mean_loss, lr, grad_norm);
      if (!after_step(n, totals[1].item<double>() > 0)) break;
    }
    if (result.exit_status == kExitFinished && !config.checkpoint.dir.empty() &&
        config.checkpoint.save_at_end && last_saved != tc.max_steps && result.steps > first_step)
      save(tc.max_steps);
    if (!config.checkpoint.dir.empty()) finish_saving();
    if (!config.logging.trace.empty()) {
      detail::write_merged_trace(acc.comm(), config.logging.trace);
      acc.print("trace: " + config.logging.trace + " (open in chrome://tracing or ui.perfetto.dev)");
    }
  }
};

TrainResult Trainer::train() {
  const Config& config = acc_.config();
  MPIACCEL_CHECK(train_data_ != nullptr, "Trainer: no training data (call train_data)");
  MPIACCEL_CHECK(step_loss_ || loss_ || pipeline_of(acc_) || (plan_.pipeline && acc_.mesh().pp()->size() > 1),
                 "Trainer: no loss (call loss, or step_loss for a custom batch)");
  at::set_num_threads(static_cast<int>(config.train.num_threads));
  detail::set_activity("preparing the model and data");
  detail::Watchdog watchdog(std::chrono::milliseconds(static_cast<int64_t>(config.distributed.timeout_s * 1000)));

  if (acc_.model() != model_) {
    OptimizerFactory make_optimizer = optimizer_factory_;
    if (optimizer_) make_optimizer = [given = optimizer_](torch::nn::Module&) { return given; };
    if (!make_optimizer)
      make_optimizer = [&config](torch::nn::Module& kept) { return detail::make_optimizer(config.optimizer, kept); };
    optimizer_ = parallelize(acc_, model_, plan_, make_optimizer);
    detail::seed_for_training(acc_);
  }
  StepLoss step = step_loss_;
  if (pipeline_of(acc_)) {
    MPIACCEL_CHECK(metrics_.empty() && !step_loss_,
                   "Trainer: a model cut into pipeline stages reports its loss only (no metric, no step_loss): "
                   "the last stage computes it");
    acc_.print(pipeline_of(acc_)->describe());
  }
  if (Pipeline* pipeline = pipeline_of(acc_))  // evaluation: the loss through the stages
    step = [pipeline](const Batch& batch) {
      StepOutput out;
      out.loss = at::scalar_tensor(pipeline->eval_loss(batch.input, batch.target), at::kDouble);
      return out;
    };
  if (!step)
    step = [forward = forward_, loss = loss_](const Batch& batch) {
      StepOutput out;
      out.output = forward(batch.input);
      out.loss = loss(out.output, batch.target);
      return out;
    };

  Loop loop(*this, step);
  acc_.print("mesh " + acc_.mesh().shape().describe() + ", strategy " + acc_.strategy().name() +
             " over its data-parallel ranks");
  acc_.print("training on " + std::to_string(train_data_->size()) + " samples, strategy " +
             acc_.strategy().name() + " on " + std::to_string(acc_.world_size()) + " rank(s) (" +
             acc_.device() + ", " + name_of(acc_.comm().backend()) + "), global batch " +
             std::to_string(loop.loader.batch_size() * config.train.grad_accum_steps * loop.loader.sampler().world_size()) +
             ", precision " + acc_.precision().describe());
  loop.run(*acc_.optimizer());
  if (loop.result.exit_status == kExitPreempted) {
    acc_.wait_for_everyone();
    return loop.result;
  }
  loop.progress.finish();
  acc_.print("done: " + std::to_string(loop.result.steps) + " steps in " +
             detail::format_duration(seconds_since(loop.start)) +
             (eval_data_ ? ", final val_loss " + std::to_string(loop.result.final_val_loss) : ""));
  if (at_end_) at_end_(acc_);
  if (text_at_end_) {
    const std::string text = text_at_end_(acc_);
    acc_.print(text_tag_ + ":\n" + text);
    loop.report.text(loop.result.steps, text_tag_, text);
  }
  detail::set_activity("end of run");
  acc_.wait_for_everyone();
  return loop.result;
}

}  // namespace mpiaccel
