// One run of the context-parallelism benchmark, at the world size mpirun
// gives it (= cp_size, no data parallelism):
//
//   attention  causal attention of one sequence of --seq positions (batch 1,
//              --heads heads of width --head-dim, float32), forward and
//              backward: at 1 rank LibTorch's fused kernel on the whole
//              sequence (what the models run without cp), at more ranks
//              cp::causal_attention on each rank's zigzag shard, by ring and
//              by all-to-all. Measured: the time of forward + backward and
//              the peak memory allocated during them (output, saved state,
//              messages, gradients), per rank.
//   model      the bundled GPT of jobs/fortunes-gpt.ini (its sizes from the
//              section.key=value overrides, seq_len = --seq) trained a step
//              at a time (forward, loss, backward, clip, AdamW, zero_grad),
//              split over the ranks by context_parallelize (ring) when there
//              are several. Measured: step time and the peak memory of
//              forward + backward above the model states (as bench_actckpt).
//
// Times: the slowest rank's, median over --iters steps after --warmup.
// Memory: mpiaccel::detail::CpuMemoryMeter, the max over ranks. Rank 0
// appends a row per measurement to --csv:
//   part,exchange,cp,seq,step_ms,peak_bytes
//
//   bench_cp --csv FILE [--seq 4096] [--heads 8] [--head-dim 64] [--warmup 1] [--iters 3] [section.key=value ...]

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "context_parallel/block_attention.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/mesh.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/runtime.hpp"
#include "recompute/cpu_memory_meter.hpp"

namespace {

using mpiaccel::bench::Clock;
using mpiaccel::bench::ms;

struct Options {
  std::string csv_path;
  int64_t seq = 4096, heads = 8, head_dim = 64;
  int warmup = 1, iters = 3;
  std::vector<std::string> overrides;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_cp: %s\nusage: bench_cp --csv FILE [--seq N] [--heads N] [--head-dim N] [--warmup N] "
               "[--iters N] [section.key=value ...]\n",
               why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  mpiaccel::bench::parse_arguments(
      argc, argv,
      [&](const std::string& name, const std::string& value) {
        if (name == "--csv") o.csv_path = value;
        else if (name == "--seq") o.seq = std::stoll(value);
        else if (name == "--heads") o.heads = std::stoll(value);
        else if (name == "--head-dim") o.head_dim = std::stoll(value);
        else if (name == "--warmup") o.warmup = std::stoi(value);
        else if (name == "--iters") o.iters = std::stoi(value);
        else return false;
        return true;
      },
      &o.overrides, usage);
  if (o.csv_path.empty()) usage("--csv FILE is required");
  if (o.iters < 1 || o.warmup < 0) usage("need --iters >= 1 and --warmup >= 0");
  return o;
}

// What one measurement found: the slowest rank's median time, the largest peak.
struct Measured {
  double step_ms;
  int64_t peak_bytes;
};

// Times `step` (warmup, then iters), then runs it once more under the meter.
Measured measure(mpiaccel::Communicator& world, const Options& o, const std::function<void()>& step) {
  std::vector<double> times;
  for (int it = -o.warmup; it < o.iters; ++it) {
    world.barrier();
    const auto t0 = Clock::now();
    step();
    const double local = ms(Clock::now() - t0);
    if (it >= 0) times.push_back(world.all_reduce_scalar(local, mpiaccel::ReduceOp::Max));
  }
  int64_t peak = 0;
  world.barrier();
  {
    mpiaccel::detail::CpuMemoryMeter meter;
    step();
    peak = meter.peak();
  }
  return {mpiaccel::bench::median(times), world.all_reduce_int(peak, mpiaccel::ReduceOp::Max)};
}

Measured attention(mpiaccel::Accelerator& acc, const Options& o, const std::string& exchange) {
  const auto group = acc.mesh().cp();
  const int64_t local = o.seq / group->size();
  torch::manual_seed(7);
  auto leaf = [&] { return at::randn({1, o.heads, local, o.head_dim}).requires_grad_(); };
  const at::Tensor q = leaf(), k = leaf(), v = leaf(), dout = at::randn({1, o.heads, local, o.head_dim});
  return measure(acc.comm(), o, [&] {
    const at::Tensor out = group->size() == 1 ? mpiaccel::cp::detail::whole_causal_attention(q, k, v)
                                              : mpiaccel::cp::causal_attention(q, k, v, group,
                                                                               mpiaccel::choice_named<mpiaccel::cp::Exchange>(exchange, "exchange"));
    out.backward(dout);
    q.mutable_grad().reset();
    k.mutable_grad().reset();
    v.mutable_grad().reset();
  });
}

Measured model_step(mpiaccel::Accelerator& acc, const Options& o) {
  const mpiaccel::Config& config = acc.config();
  acc.set_seed(0);
  const mpiaccel::ModelSpec spec = mpiaccel::ModelSpec::from(config.model, config.train.seq_len);
  const auto model = mpiaccel::make_model("gpt", spec);
  if (acc.mesh().cp()->size() > 1) mpiaccel::context_parallelize(*model, acc.mesh().cp(), mpiaccel::CpCommStrategy::Ring);
  const auto module = mpiaccel::as_module(model);
  auto optimizer = std::make_shared<torch::optim::AdamW>(module->parameters(), torch::optim::AdamWOptions(1e-4));
  acc.prepare(module, optimizer);
  const std::vector<int64_t> shape{1, config.train.seq_len};
  torch::manual_seed(1);  // the cp ranks read the same sequence
  const at::Tensor tokens = at::randint(spec.vocab_size, shape, at::kLong);
  const at::Tensor targets = at::randint(spec.vocab_size, shape, at::kLong);
  acc.backward(model->loss(model->forward(tokens), targets));  // gradients exist before the metered step
  acc.zero_grad();
  return measure(acc.comm(), o, [&] {
    acc.backward(model->loss(model->forward(tokens), targets));
    acc.clip_grad_norm(1.0);
    acc.step();
    acc.zero_grad();
  });
}

void append(const Options& o, const std::string& part, const std::string& exchange, int cp, const Measured& m) {
  const bool is_new = !std::ifstream(o.csv_path).good();
  std::ofstream csv(o.csv_path, std::ios::app);
  MPIACCEL_CHECK(csv.good(), "bench_cp: cannot append to " + o.csv_path);
  if (is_new) csv << "part,exchange,cp,seq,step_ms,peak_bytes\n";
  csv << part << ',' << exchange << ',' << cp << ',' << o.seq << ',' << m.step_ms << ',' << m.peak_bytes << '\n';
  std::printf("bench/cp: %s %s cp %d seq %lld: %.1f ms, peak %.2f MiB per rank\n", part.c_str(), exchange.c_str(),
              cp, static_cast<long long>(o.seq), m.step_ms, double(m.peak_bytes) / 1048576.0);
}

int run(int argc, char** argv) {
  mpiaccel::Runtime runtime(&argc, &argv);
  const Options o = parse_options(argc, argv);
  at::set_num_threads(1);  // one intra-op thread per rank: ranks share the cores
  std::vector<std::string> overrides{"logging.level=warn", "train.seq_len=" + std::to_string(o.seq),
                                     "train.batch_size=1", "model.dropout=0"};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  mpiaccel::Config config;
  {
    auto world = mpiaccel::make_mpi_world(runtime, std::chrono::seconds(300));
    overrides.push_back("parallelism.cp_size=" + std::to_string(world->size()));
    config = mpiaccel::load_config(*world, MPIACCEL_SOURCE_DIR "/jobs/fortunes-gpt.ini", overrides);
  }
  mpiaccel::Accelerator acc(runtime, config);
  const int cp = acc.world_size();
  for (const std::string& exchange : cp == 1 ? std::vector<std::string>{"whole"}
                                            : std::vector<std::string>{"ring", "alltoall"}) {
    const Measured m = attention(acc, o, exchange);
    if (acc.is_main_process()) append(o, "attention", exchange, cp, m);
  }
  const Measured m = model_step(acc, o);
  if (acc.is_main_process()) append(o, "model", cp == 1 ? "whole" : "ring", cp, m);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiaccel::bench::run_main("bench_cp", [&] { return run(argc, argv); });
}
