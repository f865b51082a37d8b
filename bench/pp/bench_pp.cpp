// One run of the pipeline benchmark: the bundled Llama cut into
// [parallelism] pp_size stages by our Pipeline (Accelerator::
// pipeline_parallelize) and trained on fixed random tokens under the
// pp_schedule and pp_microbatches the section.key=value overrides select,
// timed step by step. run.sh runs it per (pp size, schedule) beside PyTorch's
// torch.distributed.pipelining (torch_pp.py) on the same model and batch.
//
//   bench_pp --label NAME --csv FILE [--warmup N] [--iters N]
//            [--n-layer L] [--n-embd E] [--n-head H] [--n-kv-head K]
//            [--intermediate I] [--vocab V] [--seq-len T] [--batch B]
//            [section.key=value ...]
//
// A step is what the trainer does under a pipeline: Pipeline::train_step
// over the batch (cut into the microbatches), AdamW step, zero_grad. Rank 0
// appends one CSV row per run to FILE (header written if the file is new):
//   label,impl,pp,schedule,microbatches,step_ms,compute_ms,bubble,theory
// step_ms: the slowest rank's step, median over steps. compute_ms: the time
// a rank computed inside the step (forwards, backwards, weight passes; not
// waiting for a message nor the optimizer), the mean over ranks, median over
// steps. bubble = 1 - compute / (the slowest rank's forward-backward time):
// the fraction of the pipeline's time a rank idles or communicates, mean
// over ranks. theory: (p - 1)/(m + p - 1) for gpipe and 1f1b,
// (p - 1)/(v·m + p - 1) interleaved, and for zb_h1 1F1B's with the drain's
// weight passes moved into it, (p - 1)(F + B - W)/... taken as 1F1B's / 3
// (Qi et al., F = B = W).

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/parallelize.hpp"
#include "mpiaccel/pipeline.hpp"
#include "mpiaccel/runtime.hpp"
#include "optim/optimizer_factory.hpp"

namespace {

using mpiaccel::bench::Clock;
using mpiaccel::bench::ms;

struct Options {
  std::string label;
  std::string csv_path;
  int warmup = 2;
  int iters = 6;
  mpiaccel::ModelSpec spec;
  int64_t batch = 16;
  std::vector<std::string> overrides;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_pp: %s\nusage: bench_pp --label NAME --csv FILE [--warmup N] [--iters N] [--n-layer L] "
               "[--n-embd E] [--n-head H] [--n-kv-head K] [--intermediate I] [--vocab V] [--seq-len T] "
               "[--batch B] [section.key=value ...]\n",
               why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  o.spec.n_layer = 8;
  o.spec.n_embd = 256;
  o.spec.n_head = 8;
  o.spec.n_kv_head = 4;
  o.spec.intermediate_size = 704;
  o.spec.vocab_size = 2048;
  o.spec.block_size = 64;
  mpiaccel::bench::parse_arguments(
      argc, argv,
      [&](const std::string& name, const std::string& value) {
        if (name == "--label") o.label = value;
        else if (name == "--csv") o.csv_path = value;
        else if (name == "--warmup") o.warmup = std::stoi(value);
        else if (name == "--iters") o.iters = std::stoi(value);
        else if (name == "--n-layer") o.spec.n_layer = std::stoll(value);
        else if (name == "--n-embd") o.spec.n_embd = std::stoll(value);
        else if (name == "--n-head") o.spec.n_head = std::stoll(value);
        else if (name == "--n-kv-head") o.spec.n_kv_head = std::stoll(value);
        else if (name == "--intermediate") o.spec.intermediate_size = std::stoll(value);
        else if (name == "--vocab") o.spec.vocab_size = std::stoll(value);
        else if (name == "--seq-len") o.spec.block_size = std::stoll(value);
        else if (name == "--batch") o.batch = std::stoll(value);
        else return false;
        return true;
      },
      &o.overrides, usage);
  if (o.label.empty() || o.csv_path.empty()) usage("--label NAME and --csv FILE are required");
  if (o.label.find(',') != std::string::npos) usage("--label must not contain a comma (CSV)");
  if (o.iters < 1 || o.warmup < 0 || o.batch < 1) usage("need --iters >= 1, --warmup >= 0, --batch >= 1");
  return o;
}

double theory(mpiaccel::PipelineScheduleKind kind, double p, double m, double v) {
  const double one_f_one_b = (p - 1) / (m + p - 1);
  switch (kind) {
    case mpiaccel::PipelineScheduleKind::Interleaved1F1B: return (p - 1) / (v * m + p - 1);
    case mpiaccel::PipelineScheduleKind::ZeroBubbleH1: return one_f_one_b / 3;
    default: return one_f_one_b;
  }
}

int run(int argc, char** argv) {
  mpiaccel::Runtime runtime(&argc, &argv);
  const Options options = parse_options(argc, argv);
  at::set_num_threads(1);  // one intra-op thread per rank: ranks share the cores

  std::vector<std::string> overrides{"logging.level=warn", "train.model=llama"};
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());
  mpiaccel::Accelerator acc(runtime, mpiaccel::Config::defaults(overrides));
  acc.set_seed(0);
  const auto model = mpiaccel::make_model("llama", options.spec);
  auto* pieces = dynamic_cast<mpiaccel::PipelineModel*>(model.get());
  mpiaccel::Pipeline& pipeline = mpiaccel::pipeline_parallelize(acc, mpiaccel::as_module(model), *pieces);
  const auto optimizer = mpiaccel::detail::make_optimizer(acc.config().optimizer, model->module());
  acc.prepare(mpiaccel::as_module(model), optimizer);

  acc.set_seed(1);  // the same tokens on every stage
  const std::vector<int64_t> shape{options.batch, options.spec.block_size};
  const auto tokens = at::randint(options.spec.vocab_size, shape, at::kLong);
  const auto targets = at::randint(options.spec.vocab_size, shape, at::kLong);

  std::vector<double> local(static_cast<size_t>(options.iters) * 3, 0.0);  // step, compute, forward-backward
  double loss = 0;
  for (int it = -options.warmup; it < options.iters; ++it) {
    if (it == 0) acc.wait_for_everyone();
    const auto t0 = Clock::now();
    loss = pipeline.train_step(tokens, targets);
    acc.step();
    acc.zero_grad();
    const auto t1 = Clock::now();
    if (it < 0) continue;
    double* row = &local[static_cast<size_t>(it) * 3];
    row[0] = ms(t1 - t0);
    row[1] = pipeline.last_timing().compute_s * 1000.0;
    row[2] = pipeline.last_timing().step_s * 1000.0;
  }
  const auto times = at::from_blob(local.data(), {options.iters, 3}, at::kDouble).clone();
  const auto slowest = acc.reduce(times, mpiaccel::ReduceOp::Max);
  const auto mean = acc.reduce(times, mpiaccel::ReduceOp::Sum) / acc.world_size();
  // Each rank's idle share of the slowest rank's forward-backward, mean over ranks.
  const auto idle = acc.reduce(1.0 - times.select(1, 1) / slowest.select(1, 2), mpiaccel::ReduceOp::Sum) /
                    acc.world_size();
  if (!acc.is_main_process()) return 0;

  auto median_of = [&](const at::Tensor& column) {
    const at::Tensor c = column.contiguous();
    return mpiaccel::bench::median(std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel()));
  };
  const auto& pc = acc.config().parallelism;
  const double step_ms = median_of(slowest.select(1, 0));
  const double compute_ms = median_of(mean.select(1, 1));
  const double bubble = median_of(idle);
  const double v = static_cast<double>(pipeline.stage_count()) / static_cast<double>(pc.pp_size);
  const double expected = theory(pipeline.schedule(), double(pc.pp_size), double(pipeline.microbatches()), v);
  const bool fresh = !std::ifstream(options.csv_path).good();
  std::ofstream csv(options.csv_path, std::ios::app);
  MPIACCEL_CHECK(csv.good(), "bench_pp: cannot append to " + options.csv_path);
  if (fresh) csv << "label,impl,pp,schedule,microbatches,step_ms,compute_ms,bubble,theory\n";
  char line[256];
  std::snprintf(line, sizeof line, "%s,ours,%lld,%s,%lld,%.1f,%.1f,%.3f,%.3f\n", options.label.c_str(),
                static_cast<long long>(pc.pp_size), mpiaccel::name_of(pc.pp_schedule).c_str(),
                static_cast<long long>(pipeline.microbatches()), step_ms, compute_ms, bubble, expected);
  csv << line;
  std::printf("bench_pp: %-20s pp %lld %s m %lld: %.1f ms/step, bubble %.3f (theory %.3f), loss %.4f\n",
              options.label.c_str(), static_cast<long long>(pc.pp_size), mpiaccel::name_of(pc.pp_schedule).c_str(),
              static_cast<long long>(pipeline.microbatches()), step_ms, bubble, expected, loss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiaccel::bench::run_main("bench_pp", [&] { return run(argc, argv); });
}
