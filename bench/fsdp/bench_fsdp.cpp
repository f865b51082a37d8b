// One run of the strategy benchmark: the bundled GPT (about 48M parameters by
// default) or Llama (--model llama) trained by our Accelerator on fixed random tokens under the
// strategy that the section.key=value overrides select, timed step by step.
// run.sh runs it once per (strategy, world size) and summarize.py compares
// every strategy with DDP at the same world size.
//
//   bench_fsdp --label NAME --csv FILE [--warmup N] [--iters N]
//              [--n-layer L] [--n-embd E] [--n-head H] [--seq-len T] [--batch B]
//              [--model gpt|llama] [--n-kv-head K] [--intermediate I] [--vocab V]
//              [section.key=value ...]
//
// A step is what the trainer does: forward and loss (under the Accelerator's
// autocast), backward, clip_grad_norm
// ([optimizer] grad_clip), AdamW step (the trainer's two parameter groups),
// zero_grad. Rank 0 appends one CSV row per run to FILE (header written if the
// file is new):
//   label,strategy,ranks,params,step_ms,forward_ms,backward_ms,optimizer_ms,
//   cpu_ms,param_bytes,grad_bytes,optimizer_bytes,state_bytes,formula,
//   formula_bytes,largest_unit_bytes,warmup_state_bytes,peak_rss_bytes
// Times: the max over ranks of each timed step (a step is as slow as its
// slowest rank), then the median over steps; cpu_ms is the process CPU time of
// a step (all threads), mean over ranks, median over steps.
//
// Model-state bytes are Strategy::memory() (our own accounting of params,
// grads and optimizer state), sampled after forward, after backward, after the
// optimizer step, and inside every unit's forward (through a UnitInterceptor
// around the strategy's, so FSDP's gathered unit is counted while it is
// gathered). state_bytes is the largest total sampled in the timed steps, on
// the rank where it is largest (param/grad/optimizer_bytes are that sample's
// parts); warmup_state_bytes the largest in the warmup steps, max over ranks:
// FSDP learns which units the model runs through units().run during the
// first forward, and until then holds them gathered. Backward gathers again,
// off the main thread's view: by symmetry its peak is the forward's plus one
// unit's full gradients in flight. peak_rss_bytes is getrusage ru_maxrss,
// max over ranks. activation_bytes is what one more forward and loss leave
// allocated for backward (CpuMemoryMeter; CPU runs), max over ranks. With
// [parallelism] tp_size > 1 the model is split first (parallelize):
// params and bytes are one rank's slices, tp the tensor-parallel ranks.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/parallelize.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/unit.hpp"
#include "optim/optimizer_factory.hpp"
#include "recompute/cpu_memory_meter.hpp"

namespace {

using mpiaccel::bench::Clock;
using mpiaccel::bench::ms;

constexpr int kColumns = 5;  // step, forward, backward, optimizer, cpu

struct Options {
  std::string label;
  std::string csv_path;
  int warmup = 2;
  int iters = 5;
  mpiaccel::ModelSpec spec;
  std::string model = "gpt";  // or "llama"
  int64_t batch = 2;
  std::vector<std::string> overrides;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_fsdp: %s\nusage: bench_fsdp --label NAME --csv FILE [--warmup N] [--iters N] "
               "[--n-layer L] [--n-embd E] [--n-head H] [--seq-len T] [--batch B] "
               "[--model gpt|llama] [--n-kv-head K] [--intermediate I] [--vocab V] [section.key=value ...]\n",
               why.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  o.spec.n_layer = 8;
  o.spec.n_embd = 704;
  o.spec.n_head = 11;  // head size 64, as GPT-2
  o.spec.vocab_size = 256;
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
        else if (name == "--seq-len") o.spec.block_size = std::stoll(value);
        else if (name == "--batch") o.batch = std::stoll(value);
        else if (name == "--model") o.model = value;
        else if (name == "--n-kv-head") o.spec.n_kv_head = std::stoll(value);
        else if (name == "--intermediate") o.spec.intermediate_size = std::stoll(value);
        else if (name == "--vocab") o.spec.vocab_size = std::stoll(value);
        else return false;
        return true;
      },
      &o.overrides, usage);
  if (o.label.empty() || o.csv_path.empty()) usage("--label NAME and --csv FILE are required");
  if (o.label.find(',') != std::string::npos) usage("--label must not contain a comma (CSV)");
  if (o.iters < 1 || o.warmup < 0 || o.batch < 1) usage("need --iters >= 1, --warmup >= 0, --batch >= 1");
  return o;
}

using Account = mpiaccel::Strategy::MemoryAccount;
int64_t total(const Account& a) { return a.param_bytes + a.grad_bytes + a.optimizer_bytes; }

// Runs around the strategy's own interceptor and samples Strategy::memory()
// while a unit's forward runs: that is when FSDP holds the unit gathered,
// which no sample between the step's phases can see.
class StateSampler : public mpiaccel::UnitInterceptor {
 public:
  StateSampler(mpiaccel::Strategy& strategy, torch::optim::Optimizer& optimizer,
               mpiaccel::UnitRunner& runner)
      : strategy_(strategy), optimizer_(optimizer), runner_(runner), around_(runner.interceptor()) {
    runner_.set_interceptor(this);
  }
  ~StateSampler() override { runner_.set_interceptor(around_); }
  StateSampler(const StateSampler&) = delete;
  StateSampler& operator=(const StateSampler&) = delete;

  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input,
                 const mpiaccel::UnitForward& forward) override {
    const mpiaccel::UnitForward sampled = [&](const at::Tensor& in) {
      sample();
      return forward(in);
    };
    return around_ ? around_->run(unit, input, sampled) : sampled(input);
  }

  void sample() {
    const Account now = strategy_.memory(optimizer_);
    if (total(now) > total(peak_)) peak_ = now;
  }
  const Account& peak() const { return peak_; }
  void reset() { peak_ = Account{}; }

 private:
  mpiaccel::Strategy& strategy_;
  torch::optim::Optimizer& optimizer_;
  mpiaccel::UnitRunner& runner_;
  mpiaccel::UnitInterceptor* around_;
  Account peak_;
};

// The ZeRO paper's per-rank model-state bytes for fp32 params, fp32 grads and
// AdamW's two fp32 moments (K = 8), Ψ parameters over N ranks; what
// Strategy::memory() should come to.
struct Formula {
  std::string text;
  double bytes = 0;
};
Formula formula_of(const std::string& strategy, const mpiaccel::Config& config, double psi, double n,
                   double largest_unit) {
  if (strategy == "ddp" || strategy == "no") return {"16P", 16 * psi};
  if (strategy == "zero1") return {"4P+4P+8P/N", 8 * psi + 8 * psi / n};
  if (strategy == "zero2") {
    // Offload adds the host fp32 master rows and the host gradient rows.
    if (config.zero.offload_optimizer == mpiaccel::OffloadChoice::Cpu) return {"4P+(4+8)P/N+8P/N host", 4 * psi + 20 * psi / n};
    return {"4P+(4+8)P/N", 4 * psi + 12 * psi / n};
  }
  if (strategy == "fsdp" && !config.fsdp.reshard_after_forward)
    // Every unit stays gathered from its forward to its backward, beside its shard.
    return {"4P+16P/N", 4 * psi + 16 * psi / n};
  if (strategy == "fsdp" || strategy == "zero3") return {"16P/N+unit", 16 * psi / n + largest_unit};
  return {"?", 0};
}

int run(int argc, char** argv) {
  mpiaccel::Runtime runtime(&argc, &argv);
  const Options options = parse_options(argc, argv);
  // One intra-op thread per rank: ranks share the node's cores.
  at::set_num_threads(1);

  std::vector<std::string> overrides{"logging.level=warn"};
  overrides.insert(overrides.end(), options.overrides.begin(), options.overrides.end());
  mpiaccel::Accelerator acc(runtime, mpiaccel::Config::defaults(overrides));
  acc.set_seed(0);
  const auto model = mpiaccel::make_model(options.model, options.spec);
  // [parallelism] tp_size: each rank keeps its slices (psi is then one rank's).
  int64_t psi = 0;
  const auto optimizer = mpiaccel::parallelize(
      acc, mpiaccel::as_module(model), mpiaccel::bundled_plan(*model, acc.config()), [&](torch::nn::Module& kept) {
        psi = mpiaccel::parameter_count(*model);
        return mpiaccel::detail::make_optimizer(acc.config().optimizer, kept);
      });
  auto* has_units = dynamic_cast<mpiaccel::HasUnits*>(model.get());
  MPIACCEL_CHECK(has_units, "bench_fsdp: the model does not run its layers through mpiaccel::HasUnits");
  StateSampler sampler(acc.strategy(), *optimizer, has_units->units());

  // Tokens fixed before the loop, different per rank: the benchmark times
  // the step, not the random number generator.
  acc.set_seed(1, /*device_specific=*/true);
  const std::vector<int64_t> shape{options.batch, options.spec.block_size};
  const auto tokens = at::randint(options.spec.vocab_size, shape, at::kLong);
  const auto targets = at::randint(options.spec.vocab_size, shape, at::kLong);
  const double grad_clip = acc.config().optimizer.grad_clip;

  std::vector<double> local(static_cast<size_t>(options.iters) * kColumns, 0.0);
  Account warmup_peak;
  for (int it = -options.warmup; it < options.iters; ++it) {
    if (it == 0) {
      acc.wait_for_everyone();
      warmup_peak = sampler.peak();
      sampler.reset();
    }
    const double cpu0 = mpiaccel::bench::process_cpu_ms();
    const auto t0 = Clock::now();
    at::Tensor loss;
    {
      const auto autocast = acc.autocast();  // as the trainer: bf16 under mixed_precision = bf16
      loss = model->loss(model->forward(tokens), targets);
    }
    const auto t1 = Clock::now();
    sampler.sample();
    acc.backward(loss);
    const auto t2 = Clock::now();
    sampler.sample();
    if (grad_clip > 0) acc.clip_grad_norm(grad_clip);
    acc.step();
    sampler.sample();
    acc.zero_grad();
    const auto t3 = Clock::now();
    const double cpu = mpiaccel::bench::process_cpu_ms() - cpu0;
    if (it < 0) continue;
    double* row = &local[static_cast<size_t>(it) * kColumns];
    row[0] = ms(t3 - t0);
    row[1] = ms(t1 - t0);
    row[2] = ms(t2 - t1);
    row[3] = ms(t3 - t2);
    row[4] = cpu;
  }

  // Activations kept for backward: what one forward and loss leave allocated
  // (host memory: meaningful on the CPU only).
  int64_t activations = 0;
  if (acc.device() == "cpu") {
    acc.wait_for_everyone();
    at::Tensor metered_loss;
    {
      mpiaccel::detail::CpuMemoryMeter meter;
      metered_loss = model->loss(model->forward(tokens), targets);
      activations = meter.current();
      acc.backward(metered_loss);
    }
    acc.zero_grad();
  }

  // After the loop: FSDP knows which units the model runs through
  // units().run (and so gathers only around their run) once they have run.
  const std::string strategy = acc.strategy().name();
  int64_t largest_unit = 0;
  double shard_ranks = acc.world_size();
  // Over one rank FSDP and ZeRO-3 run as one process does (no units to report).
  if ((strategy == "fsdp" || strategy == "zero3") && acc.mesh().dp()->size() > 1) {
    const mpiaccel::FsdpInfo info = mpiaccel::fsdp_info(acc.strategy());
    largest_unit = info.largest_unit_bytes;
    shard_ranks = info.shard_group_size;
  }
  const Formula formula = formula_of(strategy, acc.config(), double(psi), shard_ranks, double(largest_unit));

  const auto times = at::from_blob(local.data(), {options.iters, kColumns}, at::kDouble).clone();
  const auto slowest = acc.reduce(times, mpiaccel::ReduceOp::Max);
  const auto mean = acc.reduce(times, mpiaccel::ReduceOp::Sum) / acc.world_size();
  // Each rank's peak sample, kept whole: the row reports the rank whose
  // model state is largest (ranks differ by uneven shards), its parts adding up.
  const Account& peak = sampler.peak();
  const std::vector<double> local_bytes{double(peak.param_bytes), double(peak.grad_bytes),
                                        double(peak.optimizer_bytes), double(total(peak)),
                                        double(total(warmup_peak)),
                                        double(mpiaccel::bench::peak_rss_bytes()), double(activations)};
  const auto bytes = acc.gather(at::tensor(local_bytes, at::kDouble).reshape({1, -1}));
  if (!acc.is_main_process()) return 0;

  std::vector<std::vector<double>> columns(kColumns);
  auto s = slowest.accessor<double, 2>();
  auto m = mean.accessor<double, 2>();
  for (int it = 0; it < options.iters; ++it) {
    for (int c = 0; c < kColumns - 1; ++c) columns[c].push_back(s[it][c]);
    columns[kColumns - 1].push_back(m[it][kColumns - 1]);
  }
  auto all = bytes.accessor<double, 2>();
  int64_t top = 0;
  double warmup_state = 0, rss = 0, activation_peak = 0;
  for (int64_t r = 0; r < all.size(0); ++r) {
    if (all[r][3] > all[top][3]) top = r;
    warmup_state = std::max(warmup_state, all[r][4]);
    rss = std::max(rss, all[r][5]);
    activation_peak = std::max(activation_peak, all[r][6]);
  }
  const auto b = all[top];
  const bool fresh = !std::ifstream(options.csv_path).good();
  std::ofstream csv(options.csv_path, std::ios::app);
  MPIACCEL_CHECK(csv.good(), "bench_fsdp: cannot append to " + options.csv_path +
                                 ": check that its directory exists and is writable");
  if (fresh)
    csv << "label,strategy,ranks,params,step_ms,forward_ms,backward_ms,optimizer_ms,cpu_ms,"
           "param_bytes,grad_bytes,optimizer_bytes,state_bytes,formula,formula_bytes,"
           "largest_unit_bytes,warmup_state_bytes,peak_rss_bytes,activation_bytes,tp\n";
  char line[512];
  std::snprintf(line, sizeof line,
                "%s,%s,%d,%lld,%.1f,%.1f,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,%.0f,%s,%.0f,%lld,%.0f,%.0f,%.0f,%d\n",
                options.label.c_str(), strategy.c_str(), acc.world_size(), static_cast<long long>(psi),
                mpiaccel::bench::median(columns[0]), mpiaccel::bench::median(columns[1]),
                mpiaccel::bench::median(columns[2]), mpiaccel::bench::median(columns[3]),
                mpiaccel::bench::median(columns[4]), b[0], b[1], b[2], b[3], formula.text.c_str(),
                formula.bytes, static_cast<long long>(largest_unit), warmup_state, rss, activation_peak,
                acc.mesh().tp()->size());
  csv << line;
  std::printf("bench_fsdp: %-16s np %d: step %.0f ms, model state %.1f MiB/rank (formula %.1f MiB)\n",
              options.label.c_str(), acc.world_size(), mpiaccel::bench::median(columns[0]),
              b[3] / (1 << 20), formula.bytes / (1 << 20));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mpiaccel::bench::run_main("bench_fsdp", [&] { return run(argc, argv); });
}
