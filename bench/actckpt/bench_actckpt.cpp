// One run of the activation-checkpointing benchmark: the bundled GPT of a job
// file (default jobs/fortunes-gpt.ini), trained by our Accelerator under the
// strategy the section.key=value overrides select, with or without
// [fsdp] activation_checkpointing. Measures the step time and the peak
// memory LibTorch allocates during forward + backward. run.sh runs it once
// per (config, strategy, world size, checkpointing) and prints the table.
//
//   bench_actckpt --label NAME --csv FILE [--config INI] [--warmup N] [--iters N]
//                 [section.key=value ...]
//
// A step is what the trainer does: forward, loss, backward, clip_grad_norm
// ([optimizer] grad_clip), AdamW step, zero_grad, on tokens fixed before the
// loop (different per rank). step_ms: the max over ranks of each timed step,
// then the median over steps.
//
// Memory: after the timed steps, one more forward + backward runs with
// mpiaccel::detail::CpuMemoryMeter installed (it wraps c10's CPU allocator
// and counts every byte allocated and freed, as the activation-checkpointing
// tests do). peak_bytes is the highest point of forward + backward above what
// was allocated before it (the model states, including gradients kept from
// the previous step, are already there and not counted; FSDP's gathered
// units, DDP's communication buffers and any gradient a strategy allocates
// anew are); kept_bytes what forward left allocated for backward (the saved
// activations, logits, loss). Both the max over ranks.
//
// Rank 0 appends one CSV row per run to FILE (header if the file is new):
//   label,strategy,ranks,checkpointing,params,n_layer,n_embd,seq_len,batch,
//   step_ms,forward_ms,backward_ms,peak_bytes,kept_bytes,recomputed_units

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/runtime.hpp"
#include "recompute/cpu_memory_meter.hpp"

namespace {

using mpiaccel::bench::Clock;
using mpiaccel::bench::ms;

constexpr int kColumns = 3;  // step, forward, backward

struct Options {
  std::string label;
  std::string csv_path;
  std::string config_path = MPIACCEL_SOURCE_DIR "/jobs/fortunes-gpt.ini";
  int warmup = 2;
  int iters = 5;
  std::vector<std::string> overrides;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_actckpt: %s\nusage: bench_actckpt --label NAME --csv FILE [--config INI] "
               "[--warmup N] [--iters N] [section.key=value ...]\n",
               why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  mpiaccel::bench::parse_arguments(
      argc, argv,
      [&](const std::string& name, const std::string& value) {
        if (name == "--label") o.label = value;
        else if (name == "--csv") o.csv_path = value;
        else if (name == "--config") o.config_path = value;
        else if (name == "--warmup") o.warmup = std::stoi(value);
        else if (name == "--iters") o.iters = std::stoi(value);
        else return false;
        return true;
      },
      &o.overrides, usage);
  if (o.label.empty() || o.csv_path.empty()) usage("--label NAME and --csv FILE are required");
  if (o.label.find(',') != std::string::npos) usage("--label must not contain a comma (CSV)");
  if (o.iters < 1 || o.warmup < 0) usage("need --iters >= 1 and --warmup >= 0");
  return o;
}

int run(int argc, char** argv) {
  mpiaccel::Runtime runtime(&argc, &argv);
  const Options options = parse_options(argc, argv);
  // One intra-op thread per rank: ranks share the node's cores.
  at::set_num_threads(1);

  std::vector<std::string> overrides{"logging.level=warn"};
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());
  mpiaccel::Config config;
  {
    // Rank 0 reads the job file; every rank parses the same bytes.
    auto world = mpiaccel::make_mpi_world(runtime, std::chrono::seconds(300));
    config = mpiaccel::load_config(*world, options.config_path, overrides);
  }
  MPIACCEL_CHECK(config.train.model == "gpt", "bench_actckpt: the job's [train] model must be gpt");
  mpiaccel::Accelerator acc(runtime, config);
  acc.set_seed(0);
  const mpiaccel::ModelSpec spec = mpiaccel::ModelSpec::from(config.model, config.train.seq_len);
  const auto model = mpiaccel::make_model("gpt", spec);
  const int64_t psi = mpiaccel::parameter_count(*model);
  const auto module = mpiaccel::as_module(model);
  const mpiaccel::OptimizerConfig& o = config.optimizer;
  auto optimizer = std::make_shared<torch::optim::AdamW>(
      module->parameters(),
      torch::optim::AdamWOptions(o.lr).betas({o.betas[0], o.betas[1]}).eps(o.eps).weight_decay(o.weight_decay));
  acc.prepare(module, optimizer);

  // Tokens fixed before the loop, different per rank.
  acc.set_seed(1, /*device_specific=*/true);
  const std::vector<int64_t> shape{config.train.batch_size, config.train.seq_len};
  const auto tokens = at::randint(spec.vocab_size, shape, at::kLong);
  const auto targets = at::randint(spec.vocab_size, shape, at::kLong);

  std::vector<double> local(static_cast<size_t>(options.iters) * kColumns, 0.0);
  for (int it = -options.warmup; it < options.iters; ++it) {
    if (it == 0) acc.wait_for_everyone();
    const auto t0 = Clock::now();
    const auto loss = model->loss(model->forward(tokens), targets);
    const auto t1 = Clock::now();
    acc.backward(loss);
    const auto t2 = Clock::now();
    if (o.grad_clip > 0) acc.clip_grad_norm(o.grad_clip);
    acc.step();
    acc.zero_grad();
    const auto t3 = Clock::now();
    if (it < 0) continue;
    double* row = &local[static_cast<size_t>(it) * kColumns];
    row[0] = ms(t3 - t0);
    row[1] = ms(t1 - t0);
    row[2] = ms(t2 - t1);
  }

  // The metered forward + backward (no optimizer step: its memory is the
  // model states', not the activations').
  int64_t peak = 0, kept = 0;
  acc.wait_for_everyone();
  {
    mpiaccel::detail::CpuMemoryMeter meter;
    const auto loss = model->loss(model->forward(tokens), targets);
    kept = meter.current();
    acc.backward(loss);
    peak = meter.peak();
  }
  acc.zero_grad();

  const auto times = at::from_blob(local.data(), {options.iters, kColumns}, at::kDouble).clone();
  const auto slowest = acc.reduce(times, mpiaccel::ReduceOp::Max);
  const auto bytes = acc.reduce(at::tensor({double(peak), double(kept)}, at::kDouble), mpiaccel::ReduceOp::Max);
  if (acc.is_main_process()) {
    std::vector<double> median(kColumns);
    for (int c = 0; c < kColumns; ++c) {
      const auto column = slowest.select(1, c).contiguous();
      median[c] = mpiaccel::bench::median(
          std::vector<double>(column.data_ptr<double>(), column.data_ptr<double>() + options.iters));
    }
    const bool is_new = !std::ifstream(options.csv_path).good();
    std::ofstream csv(options.csv_path, std::ios::app);
    MPIACCEL_CHECK(csv.good(), "bench_actckpt: cannot append to " + options.csv_path);
    if (is_new)
      csv << "label,strategy,ranks,checkpointing,params,n_layer,n_embd,seq_len,batch,step_ms,forward_ms,"
             "backward_ms,peak_bytes,kept_bytes\n";
    csv << options.label << ',' << acc.strategy().name() << ',' << acc.world_size() << ','
        << (config.fsdp.activation_checkpointing ? 1 : 0) << ',' << psi << ',' << spec.n_layer << ','
        << spec.n_embd << ',' << spec.block_size << ',' << config.train.batch_size << ',' << median[0] << ','
        << median[1] << ',' << median[2] << ',' << static_cast<int64_t>(bytes[0].item<double>()) << ','
        << static_cast<int64_t>(bytes[1].item<double>()) << '\n';
    std::printf("%s %s np %d checkpointing %s: step %.1f ms (forward %.1f, backward %.1f), peak %.2f MiB, "
                "kept %.2f MiB\n",
                options.label.c_str(), acc.strategy().name().c_str(), acc.world_size(),
                config.fsdp.activation_checkpointing ? "on" : "off", median[0], median[1], median[2],
                bytes[0].item<double>() / 1048576.0, bytes[1].item<double>() / 1048576.0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiaccel::bench::run_main("bench_actckpt", [&] { return run(argc, argv); });
}
