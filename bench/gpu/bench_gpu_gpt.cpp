// GPT-2 small training throughput on one GPU through mpiaccel::Accelerator:
// bf16 autocast, SDPA attention, fused AdamW, the strategy given on the
// command line (no | ddp | fsdp, world size 1). Prints one line:
//   ours strategy=ddp tokens_per_s=... mfu=... step_ms=... peak_mem_gib=...
// bench/gpu/run.sh runs it beside PyTorch eager (eager_gpt.py) on the same
// model, batch and sequence length, and bench/gpu/report.py makes the table.
//
//   bench_gpu_gpt STRATEGY [BATCH SEQ STEPS WARMUP]   (MPIACCEL_BENCH_DEVICE=cpu: on the CPU)

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/bench_util.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/device_streams.hpp"
#include "optim/optimizer_factory.hpp"

using namespace mpiaccel;

namespace {

// The H200's dense bf16 peak by NVIDIA's datasheet (989.4 TFLOP/s, the
// H100 SXM's): the MFU denominator, as nanoGPT and torchtitan use the
// datasheet figure.
constexpr double kPeakFlops = 989.4e12;

Config bench_config(const std::string& strategy) {
  Config config;
  config.set("distributed.strategy", strategy);
  config.distributed.mixed_precision = MixedPrecision::Bf16;
  // MPIACCEL_BENCH_DEVICE=cpu: a smoke test of the program on the CPU.
  const char* device = std::getenv("MPIACCEL_BENCH_DEVICE");
  config.set("distributed.device", device ? device : "cuda");
  config.distributed.timeout_s = 600;
  config.optimizer.lr = 6e-4;
  config.optimizer.betas = {0.9, 0.95};
  config.optimizer.weight_decay = 0.1;
  return config;
}

ModelSpec gpt2_small(int64_t seq) {
  ModelSpec spec;
  spec.n_layer = 12;
  spec.n_head = 12;
  spec.n_embd = 768;
  spec.vocab_size = 50304;
  spec.block_size = seq;
  return spec;
}

// nanoGPT's estimate: 6 flops per parameter per token (forward and
// backward), plus the attention products, 12 · layers · width · context;
// the position embedding is left out of N, as there.
double flops_per_token(const ModelSpec& spec, int64_t parameters) {
  const double n = static_cast<double>(parameters - spec.block_size * spec.n_embd);
  return 6.0 * n + 12.0 * spec.n_layer * spec.n_embd * spec.block_size;
}

int run(int argc, char** argv) {
  Runtime runtime(&argc, &argv);
  const std::string strategy = argc > 1 ? argv[1] : "ddp";
  const int64_t batch = argc > 2 ? std::stoll(argv[2]) : 16;
  const int64_t seq = argc > 3 ? std::stoll(argv[3]) : 1024;
  const int steps = argc > 4 ? std::stoi(argv[4]) : 20;
  const int warmup = argc > 5 ? std::stoi(argv[5]) : 5;

  Accelerator acc(runtime, bench_config(strategy));
  const ModelSpec spec = gpt2_small(seq);
  torch::manual_seed(1);
  auto model = make_model("gpt", spec);
  int64_t parameters = 0;
  for (const auto& p : model->module().parameters()) parameters += p.numel();
  auto optimizer = mpiaccel::detail::make_optimizer(acc.config().optimizer, model->module());
  acc.prepare(std::shared_ptr<torch::nn::Module>(model, &model->module()), optimizer);
  const at::Device device(acc.device());

  auto one_step = [&] {
    const at::Tensor tokens = at::randint(0, spec.vocab_size, {batch, seq + 1},
                                          at::TensorOptions(at::kLong).device(device));
    at::Tensor loss;
    {
      auto autocast = acc.autocast();
      loss = model->loss(model->forward(tokens.narrow(1, 0, seq)), tokens.narrow(1, 1, seq));
    }
    acc.backward(loss);
    acc.clip_grad_norm(1.0);
    acc.step();
    acc.zero_grad();
  };
  const auto finished = [&] {
    mpiaccel::detail::StreamEvent::record_current(device).wait_host(std::chrono::minutes(5), "the benchmark step");
  };
  for (int i = 0; i < warmup; ++i) one_step();
  finished();
  const auto start = bench::Clock::now();
  for (int i = 0; i < steps; ++i) one_step();
  finished();
  const double seconds = bench::ms(bench::Clock::now() - start) / 1000.0;
  const double tokens_per_s = static_cast<double>(steps * batch * seq) / seconds;
  const double mfu = tokens_per_s * flops_per_token(spec, parameters) / kPeakFlops;
  if (acc.is_main_process())
    std::printf("ours strategy=%s parameters=%lld batch=%lld seq=%lld tokens_per_s=%.0f mfu=%.4f "
                "step_ms=%.2f\n",
                strategy.c_str(), static_cast<long long>(parameters), static_cast<long long>(batch),
                static_cast<long long>(seq), tokens_per_s, mfu, 1000.0 * seconds / steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main("bench_gpu_gpt", [&] { return run(argc, argv); });
}
