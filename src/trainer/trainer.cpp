#include "mpiaccel/trainer.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <map>
#include <string>
#include <vector>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/models.hpp"
#include "trainer/evaluation.hpp"
#include "trainer/lr_schedule.hpp"
#include "trainer/metrics_log.hpp"
#include "trainer/optimizer_factory.hpp"
#include "trainer/progress.hpp"
#include "trainer/trace_writer.hpp"
#include "trainer/watchdog.hpp"
#include "runtime/activity.hpp"
#include "runtime/trace.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Bytes the model produced, made safe for a terminal.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) out += (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? char(c) : '?';
  return out;
}

bool is_text_model(const std::string& kind) { return kind == "gpt"; }

std::map<std::string, std::string> trainer_counters(int64_t step, const LoaderState& loader,
                                                    int64_t global_batch) {
  return {{"step", std::to_string(step)},
          {"scheduler_step", std::to_string(step)},
          {"epoch", std::to_string(loader.epoch)},
          {"position", std::to_string(loader.position)},
          {"samples_seen", std::to_string(step * global_batch)}};
}

int64_t counter(const std::map<std::string, std::string>& counters, const std::string& key) {
  auto it = counters.find(key);
  MPIACCEL_CHECK(it != counters.end(), "checkpoint has no trainer counter '" + key +
                                           "': it was not written by `mpiaccel train`");
  return std::stoll(it->second);
}

// "none" → "", "latest" → the checkpoint dir if it has a committed checkpoint
// (a first run of a requeued job has none yet), else the path as given.
std::string resume_source(Accelerator& acc) {
  const auto& ck = acc.config().checkpoint;
  if (ck.resume == "none") return "";
  if (ck.resume != "latest") return ck.resume;
  // Rank 0 looks, so every rank takes the same decision.
  int64_t found = 0;
  if (acc.is_main_process()) found = std::filesystem::exists(std::filesystem::path(ck.dir) / "latest") ? 1 : 0;
  found = acc.comm().all_reduce_int(found, ReduceOp::Max);
  if (!found) {
    acc.print("resume = latest: no checkpoint in " + ck.dir + " yet, starting from step 0");
    return "";
  }
  return ck.dir;
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

std::vector<std::string> class_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c != ',') {
      if (c != ' ' && c != '\t') item += c;
    } else if (!item.empty()) {
      out.push_back(item);
      item.clear();
    }
  }
  return out;
}

// [fsdp] cpu_ram_efficient_loading (docs/fsdp.md "Memory-efficient init"):
// with a sharding strategy, ranks >= 1 build the model without memory and
// FSDP streams rank 0's shards to them. Units then start sharded and are
// gathered when the model runs them through units().run, so every unit the
// wrap policy picks must be one the model runs that way; otherwise (a policy
// that may pick other modules) every rank builds in full, and `why_not` says
// why. The answer is the same on every rank (config and model kind only).
bool deferred_init_allowed(const Config& config, std::string& why_not) {
  const bool sharded = config.distributed.strategy == "fsdp" ||
                       (config.distributed.strategy == "zero" && config.zero.stage == 3);
  if (!sharded || !config.fsdp.cpu_ram_efficient_loading) return false;
  const std::string& policy = config.fsdp.auto_wrap_policy;
  if (policy == "NO_WRAP") return true;
  if (policy == "TRANSFORMER_BASED_WRAP") {
    const std::vector<std::string> runs = model_unit_classes(config.train.model);
    for (const std::string& cls : class_list(config.fsdp.transformer_layer_cls_to_wrap))
      if (std::find(runs.begin(), runs.end(), cls) == runs.end()) {
        why_not = "class " + cls + " is not one the " + config.train.model + " model runs through units().run";
        return false;
      }
    return true;
  }
  why_not = "auto_wrap_policy = " + policy + " may pick modules the model does not run through units().run";
  return false;
}

std::string at_step(int64_t step, const char* phase) {
  return "step " + std::to_string(step) + ": " + phase;
}

}  // namespace

TrainResult train(Accelerator& acc) {
  const Config& config = acc.config();
  const auto& tc = config.train;
  at::set_num_threads(static_cast<int>(tc.num_threads));
  detail::set_activity("preparing the model and data");
  detail::Watchdog watchdog(std::chrono::milliseconds(static_cast<int64_t>(config.distributed.timeout_s * 1000)));

  // Identical initialisation on every rank (DDP also broadcasts rank 0's).
  acc.set_seed(static_cast<uint64_t>(config.distributed.seed));
  ModelInit init;
  std::string why_not;
  if (deferred_init_allowed(config, why_not) && acc.world_size() > 1) {
    // Rank 0's values are streamed to the others: only rank 0 materialises them.
    init.deferred = !acc.is_main_process();
    init.device = acc.device();
  } else if (!why_not.empty()) {
    acc.print("[fsdp] cpu_ram_efficient_loading: every rank builds the full model (" + why_not + ")");
  }
  auto model = make_model(tc.model, ModelSpec::from(config.model, tc.seq_len), init);
  auto optimizer = detail::make_optimizer(config.optimizer, model->module());
  acc.prepare(as_module(model), optimizer);
  // Dropout masks differ per rank, like independent data-parallel workers.
  acc.set_seed(static_cast<uint64_t>(config.distributed.seed) + 1, /*device_specific=*/true);

  auto train_data = make_dataset(tc.dataset, tc.data_dir, "train", tc.seq_len, tc.val_fraction);
  auto val_data = make_dataset(tc.dataset, tc.data_dir, "val", tc.seq_len, tc.val_fraction);
  auto loader = acc.make_loader(train_data, tc.batch_size, /*shuffle=*/true);
  auto val_loader = acc.make_loader(val_data, tc.batch_size, /*shuffle=*/false);
  const int64_t eval_batches = std::min<int64_t>(tc.eval_batches, std::max<int64_t>(1, val_loader.batches_per_epoch()));

  const bool text = is_text_model(tc.model);
  const int64_t units_per_sample = text ? tc.seq_len : 1;
  const int64_t units_per_step = units_per_sample * tc.batch_size * tc.grad_accum_steps * acc.world_size();
  const char* unit_name = text ? "tok/s" : "samples/s";
  const char* throughput_key = text ? "tokens_per_s" : "samples_per_s";

  acc.print("mpiaccel train: " + tc.model + " (" + std::to_string(parameter_count(*model)) +
            " parameters) on " + tc.dataset + " (" + std::to_string(train_data->size()) +
            " training samples), strategy " + acc.strategy().name() + " on " +
            std::to_string(acc.world_size()) + " rank(s), global batch " +
            std::to_string(tc.batch_size * tc.grad_accum_steps * acc.world_size()) + ", precision " +
            acc.precision().describe());

  detail::MetricsLog metrics(config.logging.metrics_file, acc.is_main_process());
  detail::Progress progress(config.logging.progress, acc.is_main_process());
  const int64_t global_batch = tc.batch_size * tc.grad_accum_steps * acc.world_size();
  int64_t first_step = 0;
  if (auto source = resume_source(acc); !source.empty()) {
    auto meta = acc.load_state(source);
    first_step = counter(meta.trainer, "step");
    loader.restore(LoaderState{counter(meta.trainer, "epoch"), counter(meta.trainer, "position")});
    acc.print("resumed from " + meta.path + " at step " + std::to_string(first_step) + " (saved by " +
              std::to_string(meta.world_size) + " rank(s), strategy " + meta.strategy + ")");
  }
  const bool checkpointing = !config.checkpoint.dir.empty();
  int64_t last_saved = first_step;
  auto save = [&](int64_t steps_done) {
    detail::set_activity(at_step(steps_done, "checkpoint save"));
    detail::TraceScope span("checkpoint save", detail::TraceLane::Io);
    auto path = acc.save_state(steps_done, trainer_counters(steps_done, loader.state(), global_batch));
    last_saved = steps_done;
    progress.message("checkpoint " + path);
  };

  if (!config.logging.trace.empty()) {
    acc.wait_for_everyone();  // a common time origin for every rank's spans
    detail::Tracer::instance().enable(Clock::now());
  }

  TrainResult result;
  const auto start = Clock::now();
  auto window_start = start;
  int64_t window_steps = 0;
  double window_loss = 0;

  for (int64_t step = first_step; step < tc.max_steps; ++step) {
    const double lr = detail::learning_rate_at(step, tc.max_steps, config.optimizer.lr, config.scheduler);
    detail::set_learning_rate(*optimizer, lr);
    maybe_inject_stall(acc.rank(), step + 1);
    double step_loss = 0;
    for (int64_t micro = 0; micro < tc.grad_accum_steps; ++micro) {
      auto guard = acc.accumulate();
      auto batch = loader.next();
      at::Tensor loss;
      {
        detail::set_activity(at_step(step + 1, "forward"));
        detail::TraceScope span("forward");
        auto autocast = acc.autocast();
        loss = model->loss(model->forward(batch.input), batch.target);
      }
      {
        detail::set_activity(at_step(step + 1, "backward (and DDP gradient all-reduce)"));
        detail::TraceScope span("backward");
        acc.backward(loss);
      }
      step_loss += loss.item<double>();
    }
    double grad_norm = 0;
    {
      detail::set_activity(at_step(step + 1, "optimizer step"));
      detail::TraceScope span("optimizer step");
      if (config.optimizer.grad_clip > 0) grad_norm = acc.clip_grad_norm(config.optimizer.grad_clip);
      acc.step();
      acc.zero_grad();
    }

    // One all-reduce per step carries the loss and the pre-emption flag. The
    // logged loss is the mean over ranks and micro-batches, so runs at
    // different world sizes compare directly (DESIGN.md §7).
    detail::set_activity(at_step(step + 1, "loss and pre-emption all-reduce"));
    auto step_totals = at::tensor({step_loss / static_cast<double>(tc.grad_accum_steps),
                                   preemption_requested() ? 1.0 : 0.0}, at::kDouble);
    acc.comm().all_reduce(step_totals, ReduceOp::Sum);
    const double mean_loss = step_totals[0].item<double>() / acc.world_size();
    const bool preempted = step_totals[1].item<double>() > 0;
    result.losses.push_back(mean_loss);
    result.steps = step + 1;
    window_loss += mean_loss;
    ++window_steps;

    const bool last = step + 1 == tc.max_steps;
    const bool log_now = last || (tc.log_every > 0 && (step + 1) % tc.log_every == 0);
    const double elapsed = seconds_since(start);
    const double window_s = seconds_since(window_start);
    detail::ProgressState state;
    state.step = step + 1;
    state.max_steps = tc.max_steps;
    state.loss = mean_loss;
    state.lr = lr;
    state.unit = unit_name;
    state.elapsed_s = elapsed;
    state.steps_per_s = window_s > 0 ? window_steps / window_s : 0;
    state.throughput = state.steps_per_s * static_cast<double>(units_per_step);
    if (log_now) {
      state.loss = window_loss / static_cast<double>(window_steps);
      metrics.write(detail::JsonLine()
                        .add("step", static_cast<long long>(step + 1))
                        .add("loss", mean_loss)
                        .add("lr", lr)
                        .add("grad_norm", grad_norm)
                        .add("elapsed_s", elapsed)
                        .add(throughput_key, state.throughput));
    }
    progress.update(state, log_now);
    if (log_now) {
      window_start = Clock::now();
      window_steps = 0;
      window_loss = 0;
    }

    const bool eval_now = last || (tc.eval_every > 0 && (step + 1) % tc.eval_every == 0);
    if (eval_now) {
      detail::set_activity(at_step(step + 1, "evaluation"));
      detail::TraceScope span("evaluation");
      auto eval = detail::evaluate(acc, *model, val_loader, eval_batches);
      result.final_val_loss = eval.loss;
      result.final_val_acc = eval.accuracy;
      auto line = detail::JsonLine()
                      .add("step", static_cast<long long>(step + 1))
                      .add("val_loss", eval.loss)
                      .add("elapsed_s", seconds_since(start));
      std::string text_line = "eval step " + std::to_string(step + 1) + ": val_loss " + std::to_string(eval.loss);
      if (eval.accuracy >= 0) {
        line.add("val_acc", eval.accuracy);
        text_line += ", val_acc " + std::to_string(eval.accuracy);
      }
      metrics.write(line);
      progress.message(text_line);
      // Evaluation time is not training throughput.
      window_start = Clock::now();
      window_steps = 0;
      window_loss = 0;
    }
    if (preempted) {
      // Every rank saw the flag in the same all-reduce: all save, all stop.
      if (checkpointing) save(step + 1);
      progress.message("pre-empted (SIGUSR1/SIGTERM) after step " + std::to_string(step + 1) +
                       (checkpointing ? ": checkpoint saved; restart with checkpoint.resume=latest"
                                      : ": no [checkpoint] dir, nothing saved"));
      result.exit_status = kExitPreempted;
      break;
    }
    if (checkpointing && config.checkpoint.every_steps > 0 && (step + 1) % config.checkpoint.every_steps == 0)
      save(step + 1);
  }
  if (result.exit_status == kExitFinished && checkpointing && config.checkpoint.save_at_end &&
      last_saved != tc.max_steps && result.steps > 0)
    save(tc.max_steps);
  if (!config.logging.trace.empty()) {
    detail::write_merged_trace(acc.comm(), config.logging.trace);
    acc.print("trace: " + config.logging.trace + " (open in chrome://tracing or ui.perfetto.dev)");
  }
  if (result.exit_status == kExitPreempted) {
    acc.wait_for_everyone();
    return result;
  }
  progress.finish();
  acc.print("done: " + std::to_string(result.steps) + " steps in " +
            detail::format_duration(seconds_since(start)) + ", final val_loss " +
            std::to_string(result.final_val_loss));

  if (text && tc.sample_tokens > 0 && acc.is_main_process()) {
    GenerateOptions options;
    options.n_tokens = tc.sample_tokens;
    options.seed = static_cast<uint64_t>(config.distributed.seed);
    acc.print("sample:\n" + printable(generate(*model, "\n", options)));
  }
  acc.wait_for_everyone();
  return result;
}

}  // namespace mpiaccel
