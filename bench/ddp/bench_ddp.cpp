// One side of the DDP benchmark: our Accelerator with strategy ddp training
// the benchmark MLP on random data, timed step by step. torch_ddp.py is the
// other side (PyTorch's own DDP over gloo) with the same model, batch, loss,
// optimizer and threads; run.sh runs both under the same mpirun and
// summarize.py compares them.
//
//   bench_ddp --raw FILE [--round R] [--warmup N] [--iters N]
//             [--optimizer sgd|adamw] [--label NAME] [section.key=value ...]
//
// --label names the rows' impl column (default "ours"); run.sh labels "solo"
// the single-rank runs it starts two at a time, the no-communication ceiling.
//
// Model: 4 x (Linear 512->2048, GELU, Linear 2048->512), 8.4M parameters;
// batch 32 per rank; MSE loss against random targets; one torch thread;
// mpiaccel::SGD (momentum 0.9) or mpiaccel::AdamW (mpiaccel/optim.hpp).
//
// Per timed iteration rank 0 appends one CSV row to FILE:
//   impl,ranks,round,iter,step_ms,forward_ms,backward_ms,optimizer_ms,
//   cpu_ms,comm_ms,hidden_ms,exposed_ms
// Times are the max over ranks of that iteration (the step is as slow as the
// slowest rank). cpu_ms is the CPU time the process used in the step, all
// its threads (compute, communication, MPI progress), mean over ranks: on a
// machine shared with other jobs it shows work, where wall time shows load. The all-reduce figures come from the reducer's record of the
// iteration's buckets (mean over ranks):
//   comm_ms    = sum over buckets of (finished - started) on the comm thread,
//   hidden_ms  = the part of those intervals that lies before backward ended
//                (the engine callback started), i.e. overlapped with backward,
//   exposed_ms = max(0, last bucket finished - backward end): what backward's
//                caller waited for after the last gradient was computed.
// hidden fraction = sum(hidden_ms) / sum(comm_ms).

#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "ddp/ddp_strategy.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/optim.hpp"
#include "mpiaccel/runtime.hpp"

namespace {

using mpiaccel::bench::Clock;
using mpiaccel::bench::ms;
using mpiaccel::bench::process_cpu_ms;

constexpr int64_t kWidth = 512;
constexpr int64_t kHidden = 2048;
constexpr int kBlocks = 4;
constexpr int64_t kBatch = 32;
constexpr int kColumns = 8;  // step, forward, backward, optimizer, cpu, comm, hidden, exposed

struct Options {
  std::string raw_path;
  int round = 0;
  int warmup = 5;
  int iters = 20;
  std::string optimizer = "sgd";
  std::string label = "ours";
  std::vector<std::string> overrides;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_ddp: %s\nusage: bench_ddp --raw FILE [--round R] [--warmup N] [--iters N] "
               "[--optimizer sgd|adamw] [--label NAME] [section.key=value ...]\n",
               why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  mpiaccel::bench::parse_arguments(
      argc, argv,
      [&](const std::string& name, const std::string& value) {
        if (name == "--raw") o.raw_path = value;
        else if (name == "--round") o.round = std::stoi(value);
        else if (name == "--warmup") o.warmup = std::stoi(value);
        else if (name == "--iters") o.iters = std::stoi(value);
        else if (name == "--optimizer") o.optimizer = value;
        else if (name == "--label") o.label = value;
        else return false;
        return true;
      },
      &o.overrides, usage);
  if (o.raw_path.empty()) usage("--raw FILE is required");
  if (o.iters < 1 || o.warmup < 0) usage("--iters must be >= 1 and --warmup >= 0");
  if (o.optimizer != "sgd" && o.optimizer != "adamw") usage("--optimizer must be sgd or adamw");
  return o;
}

// The same layer sequence as torch_ddp.py, so parameter names, order and
// initialisation scheme (LibTorch's Linear default = PyTorch's) match.
torch::nn::Sequential make_model() {
  torch::nn::Sequential model;
  for (int b = 0; b < kBlocks; ++b) {
    model->push_back(torch::nn::Linear(kWidth, kHidden));
    model->push_back(torch::nn::GELU());
    model->push_back(torch::nn::Linear(kHidden, kWidth));
  }
  return model;
}


// The reducer's record of the last synchronized backward, as
// {comm, hidden, exposed} in milliseconds.
std::array<double, 3> overlap_of(const mpiaccel::detail::Reducer& reducer) {
  const auto timings = reducer.last_bucket_timings();
  const auto backward_end = reducer.last_backward_end();
  double comm = 0, hidden = 0;
  Clock::time_point last_finish{};
  for (const auto& t : timings) {
    comm += ms(t.finished - t.started);
    if (t.started < backward_end) hidden += ms(std::min(t.finished, backward_end) - t.started);
    last_finish = std::max(last_finish, t.finished);
  }
  const double exposed = timings.empty() ? 0.0 : std::max(0.0, ms(last_finish - backward_end));
  return {comm, hidden, exposed};
}

int run(int argc, char** argv) {
  mpiaccel::Runtime runtime(&argc, &argv);
  const Options options = parse_options(argc, argv);
  // One intra-op thread per rank (as torch.set_num_threads(1) on the peer):
  // ranks share the node's cores, more threads would only oversubscribe.
  at::set_num_threads(1);

  std::vector<std::string> overrides{"distributed.strategy=ddp", "logging.level=warn"};
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());
  mpiaccel::Accelerator acc(runtime, mpiaccel::Config::defaults(overrides));
  acc.set_seed(0);
  auto model = make_model();
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  if (options.optimizer == "sgd")
    optimizer = std::make_shared<mpiaccel::SGD>(
        model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  else
    optimizer = std::make_shared<mpiaccel::AdamW>(
        model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  acc.prepare(model.ptr(), optimizer);
  auto* ddp = dynamic_cast<mpiaccel::detail::DdpStrategy*>(&acc.strategy());
  MPIACCEL_CHECK(ddp, "bench_ddp: the strategy is " + acc.strategy().name() + ", expected ddp");

  // Data fixed before the loop, different per rank: the benchmark times the
  // step, not the random number generator.
  torch::manual_seed(1 + acc.rank());
  const auto input = torch::randn({kBatch, kWidth});
  const auto target = torch::randn({kBatch, kWidth});

  std::vector<double> local(static_cast<size_t>(options.iters) * kColumns, 0.0);
  for (int it = -options.warmup; it < options.iters; ++it) {
    if (it == 0) acc.wait_for_everyone();
    const double cpu0 = process_cpu_ms();
    const auto t0 = Clock::now();
    const auto loss = torch::mse_loss(model->forward(input), target);
    const auto t1 = Clock::now();
    acc.backward(loss);
    const auto t2 = Clock::now();
    acc.step();
    acc.zero_grad();
    const auto t3 = Clock::now();
    const double cpu = process_cpu_ms() - cpu0;
    if (it < 0) continue;
    const auto [comm, hidden, exposed] = overlap_of(ddp->reducer());
    double* row = &local[static_cast<size_t>(it) * kColumns];
    row[0] = ms(t3 - t0);
    row[1] = ms(t1 - t0);
    row[2] = ms(t2 - t1);
    row[3] = ms(t3 - t2);
    row[4] = cpu;
    row[5] = comm;
    row[6] = hidden;
    row[7] = exposed;
  }

  const auto local_tensor =
      torch::from_blob(local.data(), {options.iters, kColumns}, torch::kDouble).clone();
  const auto slowest = acc.reduce(local_tensor, mpiaccel::ReduceOp::Max);
  const auto mean = acc.reduce(local_tensor, mpiaccel::ReduceOp::Sum) / acc.world_size();
  if (acc.is_main_process()) {
    std::ofstream raw(options.raw_path, std::ios::app);
    MPIACCEL_CHECK(raw.good(), "bench_ddp: cannot append to " + options.raw_path +
                                   ": check that its directory exists and is writable");
    auto s = slowest.accessor<double, 2>();
    auto m = mean.accessor<double, 2>();
    char line[256];
    for (int it = 0; it < options.iters; ++it) {
      std::snprintf(line, sizeof line, "%s,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n",
                    options.label.c_str(), acc.world_size(), options.round, it, s[it][0], s[it][1], s[it][2], s[it][3],
                    m[it][4], m[it][5], m[it][6], m[it][7]);
      raw << line;
    }
    // bench/precision reads this: what one step puts on the wire.
    std::fprintf(stderr, "bench_ddp: all-reduced bytes per step: %lld (%s)\n",
                 static_cast<long long>(ddp->reducer().reduced_bytes_per_step()),
                 acc.precision().describe().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiaccel::bench::run_main("bench_ddp", [&] { return run(argc, argv); });
}
