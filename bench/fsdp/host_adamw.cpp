// The host AdamW (mpiaccel::host_adamw_step: ZeRO-Offload's step and
// mpiaccel::AdamW's on float32 CPU parameters) against torch::optim::AdamW
// and LibTorch's fused CPU kernel (at::_fused_adamw_, what
// torch.optim.AdamW(fused=True) runs; LibTorch >= 2.4) on the same shard: one
// parameter of --numel float32 elements (default 10M) with its gradient,
// weight decay on.
//
//   bench_host_adamw [--numel N] [--steps S] [--rounds R] [--threads 1,2] [--csv FILE]
//
// Each round times S steps of every configuration (torch, fused and ours at
// each thread count of --threads, default 1 and 2), in the opposite order to the round before so drift on
// a shared machine hits both sides alike; a configuration's figure is the
// median step time over all its timed steps. Prints a table and writes one
// CSV row per configuration. Also prints how far ours ended up from torch
// after the same steps (0 bits differ on CPUs with AVX2+FMA).

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpiaccel/optim.hpp"
#include "runtime/torch_compat.hpp"

namespace {

struct Options {
  int64_t numel = 10'000'000;
  int steps = 10;
  int rounds = 3;
  std::vector<int> threads{1, 2};
  std::string csv;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--numel") o.numel = std::stoll(value());
    else if (arg == "--steps") o.steps = std::stoi(value());
    else if (arg == "--rounds") o.rounds = std::stoi(value());
    else if (arg == "--csv") o.csv = value();
    else if (arg == "--threads") {
      o.threads.clear();
      std::string list = value();
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        o.threads.push_back(std::stoi(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    }
    else if (arg == "--help" || arg == "-h") {
      std::printf("usage: bench_host_adamw [--numel N] [--steps S] [--rounds R] [--threads 1,2] [--csv FILE]\n");
      std::exit(0);
    } else {
      throw std::runtime_error("unknown argument " + arg + " (see --help)");
    }
  }
  if (o.numel <= 0 || o.steps <= 0 || o.rounds <= 0 || o.threads.empty() ||
      *std::min_element(o.threads.begin(), o.threads.end()) <= 0 || o.threads.front() != 1)
    throw std::runtime_error("--numel, --steps, --rounds and --threads must be positive, and "
                             "--threads must start with 1 (torch at 1 thread is the reference)");
  return o;
}

struct Config {
  std::string impl;  // "torch" | "fused" | "ours"
  int threads;
  at::Tensor param;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  at::Tensor exp_avg, exp_avg_sq, step;  // the fused kernel's state
  std::vector<double> ms;
};

constexpr bool kHaveFusedCpu = MPIACCEL_TORCH_AT_LEAST(2, 4);

// One step of LibTorch's fused CPU AdamW with the optimizer's options, as
// torch.optim.AdamW(fused=True) takes it (the count incremented first).
void fused_step(Config& c) {
#if MPIACCEL_TORCH_AT_LEAST(2, 4)
  const auto& o = static_cast<const torch::optim::AdamWOptions&>(c.optimizer->defaults());
  c.step.add_(1);
  at::_fused_adamw_({c.param}, {c.param.grad()}, {c.exp_avg}, {c.exp_avg_sq}, {}, {c.step}, o.lr(),
                    std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)c;
#endif
}

const char* name_of(const std::string& impl) {
  if (impl == "torch") return "torch::optim::AdamW";
  if (impl == "fused") return "at::_fused_adamw_";
  return "mpiaccel::host_adamw_step";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  torch::manual_seed(1);
  const at::Tensor start = torch::randn({o.numel});
  const at::Tensor grad = torch::randn({o.numel}) * 1e-2;
  std::vector<Config> configs;
  std::vector<std::pair<std::string, int>> runs;
  for (const char* impl : {"torch", "fused", "ours"})
    if (kHaveFusedCpu || std::string(impl) != "fused")
      for (int t : o.threads) runs.emplace_back(impl, t);
  for (auto [impl, threads] : runs) {
    Config c;
    c.impl = impl;
    c.threads = threads;
    c.param = start.clone().requires_grad_(true);
    c.param.mutable_grad() = grad.clone();
    c.optimizer = std::make_unique<torch::optim::AdamW>(
        std::vector<at::Tensor>{c.param}, torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
    c.exp_avg = at::zeros_like(start);
    c.exp_avg_sq = at::zeros_like(start);
    c.step = at::zeros({}, at::kFloat);
    configs.push_back(std::move(c));
  }
  auto one_step = [](Config& c) {
    at::NoGradGuard no_grad;
    if (c.impl == "torch") c.optimizer->step();
    else if (c.impl == "fused") fused_step(c);
    else mpiaccel::host_adamw_step(*c.optimizer);
  };
  // Warm-up: creates the state (first-touch of 2 × numel floats) outside the timing.
  for (Config& c : configs) {
    at::set_num_threads(c.threads);
    one_step(c);
  }
  for (int round = 0; round < o.rounds; ++round) {
    std::vector<size_t> order(configs.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = round % 2 ? order.size() - 1 - k : k;
    for (size_t k : order) {
      Config& c = configs[k];
      at::set_num_threads(c.threads);
      for (int s = 0; s < o.steps; ++s) {
        const auto t0 = std::chrono::steady_clock::now();
        one_step(c);
        c.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  // Same number of steps on the same data: torch 1 thread and ours 1 thread must agree.
  const at::Tensor& ref = configs[0].param;
  const at::Tensor& ours = configs.at(configs.size() - o.threads.size()).param;
  const double rel = (ours - ref).norm().item<double>() / ref.norm().item<double>();
  const int64_t differing = (ours != ref).sum().item<int64_t>();

  const double peer = median(configs[0].ms);
  const double bytes = 5.0 * 4 * o.numel;  // p, m, v read+written, g read: a lower bound of traffic
  std::printf("host AdamW, %lld float32 elements, %d rounds x %d steps (median step time)\n",
              static_cast<long long>(o.numel), o.rounds, o.steps);
  std::printf("%-28s %8s %10s %10s %12s\n", "implementation", "threads", "ms/step", "GB/s", "vs torch 1t");
  std::string csv = "implementation,threads,numel,ms_per_step,gb_per_s,speedup_vs_torch_1t\n";
  for (const Config& c : configs) {
    const double ms = median(c.ms);
    const std::string name = name_of(c.impl);
    std::printf("%-28s %8d %10.2f %10.2f %11.2fx\n", name.c_str(), c.threads, ms, bytes / ms / 1e6, peer / ms);
    char line[256];
    std::snprintf(line, sizeof line, "%s,%d,%lld,%.3f,%.3f,%.3f\n", c.impl.c_str(), c.threads,
                  static_cast<long long>(o.numel), ms, bytes / ms / 1e6, peer / ms);
    csv += line;
  }
  std::printf("ours vs torch after %d steps (1 thread each): max rel diff %.3g, %lld elements differ\n",
              1 + o.rounds * o.steps, rel, static_cast<long long>(differing));
  if (!o.csv.empty()) {
    std::ofstream out(o.csv);
    if (!out) throw std::runtime_error("cannot write " + o.csv);
    out << csv;
    std::printf("wrote %s\n", o.csv.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_host_adamw: %s\n", e.what());
  return 1;
}
