// ctest: links mpiaccel; np 1 2 3 4; timeout 300
// `mpiaccel estimate-memory` against what the strategies actually hold: the
// bundled GPT of jobs/fortunes-gpt.ini (its [model], [train] and [optimizer],
// read through load_config) prepared under every strategy on the real ranks,
// one real AdamW step taken (so the optimizer state exists), then
// Strategy::memory() (params, grads, optimizer bytes this rank holds, device
// and host together) compared with estimate_memory() for the same strategy
// and world size (DDP's node-shared parameters: all ranks on this node share
// them): each term and their sum within 10 % on every rank, and
// FSDP's largest gathered unit equal to the estimate's. At np 3 the shards
// are uneven; the estimate rounds every parameter's rows up as the strategies
// do (torch.chunk), so it is the largest rank's figure.
#define BOOST_TEST_MODULE estimate_vs_measured
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"
#include "mpiaccel/strategies.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/strategy.hpp"
#include "test_paths.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 0.10;

// One strategy as the config selects it, and the estimate row it answers to.
struct Case {
  std::string label;
  std::vector<std::string> overrides;
  std::string estimate;  ///< estimate_memory's strategy name
  bool offload = false;
};

std::vector<Case> cases() {
  return {
      {"ddp", {"distributed.strategy=ddp", "ddp.node_shared_params=false"}, "ddp"},
      {"ddp node-shared", {"distributed.strategy=ddp"}, "ddp"},
      {"ddp copied grads",
       {"distributed.strategy=ddp", "ddp.gradient_as_bucket_view=false", "ddp.node_shared_params=false"},
       "ddp"},
      {"zero1", {"distributed.strategy=zero", "zero.stage=1"}, "zero1"},
      {"zero2", {"distributed.strategy=zero", "zero.stage=2"}, "zero2"},
      {"zero1 offload", {"distributed.strategy=zero", "zero.stage=1", "zero.offload_optimizer=cpu"}, "zero1", true},
      {"zero2 offload", {"distributed.strategy=zero", "zero.stage=2", "zero.offload_optimizer=cpu"}, "zero2", true},
      {"zero3", {"distributed.strategy=zero", "zero.stage=3"}, "zero3"},
      {"zero3 offload", {"distributed.strategy=zero", "zero.stage=3", "zero.offload_param=cpu"}, "zero3", true},
      {"fsdp FULL_SHARD", {"distributed.strategy=fsdp", "fsdp.sharding_strategy=FULL_SHARD"}, "fsdp"},
      {"fsdp SHARD_GRAD_OP", {"distributed.strategy=fsdp", "fsdp.sharding_strategy=SHARD_GRAD_OP"}, "fsdp"},
      {"fsdp offload", {"distributed.strategy=fsdp", "fsdp.cpu_offload=true"}, "fsdp", true},
  };
}

struct Measured {
  Strategy::MemoryAccount account;
  int64_t largest_unit_bytes = -1;  ///< FSDP only
};

// Prepares the strategy the config selects over the job's GPT and takes one
// training step on random tokens; returns this rank's accounting after it.
Measured prepare_and_step(const Config& config) {
  const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
  at::manual_seed(config.distributed.seed);
  std::shared_ptr<Model> model = make_model(config.train.model, spec);
  std::shared_ptr<torch::nn::Module> module = as_module(model);
  const OptimizerConfig& o = config.optimizer;
  auto optimizer = std::make_shared<torch::optim::AdamW>(
      module->parameters(), torch::optim::AdamWOptions(o.lr)
                                .betas({o.betas[0], o.betas[1]})
                                .eps(o.eps)
                                .weight_decay(o.weight_decay));
  std::unique_ptr<Strategy> strategy = make_strategy(config, world_ptr());
  strategy->prepare(module, optimizer);

  at::manual_seed(1000 + world().rank());
  const std::vector<int64_t> shape{config.train.batch_size, config.train.seq_len};
  const at::Tensor tokens = at::randint(spec.vocab_size, shape, at::kLong);
  const at::Tensor targets = at::randint(spec.vocab_size, shape, at::kLong);
  strategy->set_gradient_sync(true);
  model->loss(model->forward(tokens), targets).backward();
  strategy->after_backward();
  strategy->step(*optimizer);

  Measured out;
  out.account = strategy->memory(*optimizer);
  const std::string name = strategy->name();
  if (name == "fsdp" || name == "zero3") out.largest_unit_bytes = fsdp_info(*strategy).largest_unit_bytes;
  strategy->zero_grad(*optimizer);
  return out;
}

bool within(const char* what, int64_t measured, int64_t estimated, std::string& report) {
  const double diff = estimated == 0 ? (measured == 0 ? 0.0 : 1.0)
                                     : std::abs(double(measured) - double(estimated)) / double(estimated);
  char text[160];
  std::snprintf(text, sizeof(text), " %s %lld/%lld (%+.1f%%)", what, static_cast<long long>(measured),
                static_cast<long long>(estimated),
                estimated == 0 ? 0.0 : 100.0 * (double(measured) - double(estimated)) / double(estimated));
  report += text;
  return diff <= kTolerance;
}

}  // namespace

BOOST_AUTO_TEST_CASE(estimate_matches_measured_accounting_of_the_bundled_gpt) {
  at::set_num_threads(1);
  const int n = world().size();
  for (const Case& c : cases()) {
    std::vector<std::string> overrides = c.overrides;
    overrides.push_back("logging.level=warn");
    const Config config = load_config(world(), MPIACCEL_SOURCE_DIR "/jobs/fortunes-gpt.ini", overrides);
    const Measured m = prepare_and_step(config);

    const ModelSpec spec = ModelSpec::from(config.model, config.train.seq_len);
    const ModelFootprint footprint = model_footprint(config.train.model, spec);
    EstimateSettings settings;
    settings.world_size = n;
    settings.optimizer_slots = optimizer_slots(config.optimizer);
    settings.gradient_as_bucket_view = config.ddp.gradient_as_bucket_view;
    // All ranks of this test run on one node.
    settings.node_shared_ranks = config.ddp.node_shared_params ? n : 1;
    settings.batch_size = config.train.batch_size;
    settings.reshard_after_forward =
        config.fsdp.reshard_after_forward && config.fsdp.sharding_strategy != ShardingStrategy::ShardGradOp;
    BOOST_TEST_REQUIRE(strategy_name(strategy_kind(config)) == c.estimate);
    const MemoryEstimate e =
        estimate_memory(footprint, spec, strategy_kind(config), c.offload, MixedPrecision::No, settings);

    // Device and host together: memory() does not say where a byte lives.
    std::string report = c.label + " np " + std::to_string(n) + " rank " + std::to_string(world().rank()) + ":";
    bool ok = within("params", m.account.param_bytes, e.param_bytes + e.host_param_bytes, report);
    ok = within("grads", m.account.grad_bytes, e.grad_bytes + e.host_grad_bytes, report) && ok;
    ok = within("optimizer", m.account.optimizer_bytes, e.optimizer_bytes + e.host_optimizer_bytes, report) && ok;
    const int64_t measured_sum = m.account.param_bytes + m.account.grad_bytes + m.account.optimizer_bytes;
    ok = within("sum", measured_sum, e.model_state_bytes() + e.host_bytes(), report) && ok;
    if (m.largest_unit_bytes >= 0) {
      // The estimate's gathered term is the running unit plus the prefetched one.
      const int64_t unit = 4 * footprint.largest_unit_params;
      report += " largest unit " + std::to_string(m.largest_unit_bytes) + "/" + std::to_string(unit);
      ok = ok && m.largest_unit_bytes == unit;
    }
    BOOST_TEST_MESSAGE(report);
    if (!ok) std::fprintf(stderr, "%s\n", report.c_str());
    MPIACCEL_CHECK_ALL(ok);
  }
}
