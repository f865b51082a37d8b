// ctest: links mpiaccel; np 1 2; timeout 300
// A sharding strategy over one rank runs as one process does (the
// Accelerator's make_run_strategy, docs/fsdp.md "One rank"): FSDP (full
// shard and shard-grad-op), ZeRO-1, -2 and -3 in fp32 train the bundled GPT
// as the single-process reference does, keep their names, and their state
// dict (what a checkpoint holds) has the very tensors of the sharded path's
// at one rank: the same names, shapes and dtypes, values within 1e-6. What
// the sharded path defines (a bf16 cast, offload) keeps it, and at two
// ranks nothing changes.
#define BOOST_TEST_MODULE one_rank_strategies
#include "support/mpi_test.hpp"

#include <algorithm>
#include <map>

#include "strategies/run_strategy.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/strategy.hpp"
#include "support/equivalence.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 1e-5;

struct Case {
  const char* label;
  std::vector<std::string> overrides;
  Compare sharded_compare = compare_replicas;  // how the sharded path's parameters are read back
};

const std::vector<Case>& sharding_cases() {
  static const std::vector<Case> cases = {
      {"fsdp", {"distributed.strategy=fsdp", "fsdp.transformer_layer_cls_to_wrap=DecoderLayer"}, compare_fsdp},
      {"fsdp", {"distributed.strategy=fsdp", "fsdp.sharding_strategy=SHARD_GRAD_OP"}, compare_fsdp},
      {"zero1", {"distributed.strategy=zero", "zero.stage=1"}},
      {"zero2", {"distributed.strategy=zero", "zero.stage=2"}},
      {"zero3", {"distributed.strategy=zero", "zero.stage=3"}, compare_fsdp},
  };
  return cases;
}

// The strategy the Accelerator makes for `config`, and whether it runs as one process.
StrategyFactory run_strategy(bool* one_process) {
  return [one_process](const Config& config, std::shared_ptr<Communicator> comm) {
    return mpiaccel::detail::make_run_strategy(config, std::move(comm), one_process);
  };
}

TrialRun train(const Config& config, StrategyFactory make, Compare compare) {
  Trial t = bundled_trial("gpt", adamw_small_eps(), 12);
  t.strategy.config = config;
  t.strategy.make = std::move(make);
  t.strategy.compare = std::move(compare);
  t.steps = 4;
  return run_trial(t, world_ptr());
}

// The tensors of a state dict by name, this rank's rows.
std::map<std::string, ShardedTensor> by_name(TrialRun& run) {
  std::map<std::string, ShardedTensor> out;
  for (ShardedTensor& t : run.strategy->state_dict(*run.optimizer).tensors) out[t.name] = t;
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_rank_runs_as_one_process_and_saves_the_same_tensors) {
  for (const Case& c : sharding_cases()) {
    const Config config = Config::defaults(c.overrides);
    bool one_process = false;
    // One rank: the fast path's parameters are whole, as one process's.
    TrialRun fast = train(config, run_strategy(&one_process),
                          world().size() == 1 ? Compare(compare_replicas) : c.sharded_compare);
    TrialRun sharded = train(config, make_strategy, c.sharded_compare);
    BOOST_TEST_MESSAGE(c.label << " " << c.overrides.back() << ": np " << world().size() << ": one process "
                               << one_process << ", max loss rel diff " << fast.max_loss_rel << " (sharded "
                               << sharded.max_loss_rel << ")");
    MPIACCEL_CHECK_ALL(one_process == (world().size() == 1));
    MPIACCEL_CHECK_ALL(fast.strategy->name() == c.label);
    MPIACCEL_CHECK_ALL(fast.max_loss_rel <= kTolerance);
    MPIACCEL_CHECK_ALL(std::max({fast.max_param_rel, fast.max_shard_rel, fast.max_full_rel}) <= kTolerance);
    if (world().size() != 1) continue;
    const auto mine = by_name(fast), theirs = by_name(sharded);
    MPIACCEL_CHECK_ALL(mine.size() == theirs.size());
    double worst = 0;
    for (const auto& [name, t] : theirs) {
      const auto it = mine.find(name);
      MPIACCEL_CHECK_ALL(it != mine.end());
      if (it == mine.end()) continue;
      const ShardedTensor& m = it->second;
      MPIACCEL_CHECK_ALL(m.global_shape == t.global_shape);
      MPIACCEL_CHECK_ALL(m.local.scalar_type() == t.local.scalar_type());
      MPIACCEL_CHECK_ALL(m.row_count == t.row_count);
      MPIACCEL_CHECK_ALL(m.local.sizes() == t.local.sizes());
      if (m.local.sizes() == t.local.sizes()) worst = std::max(worst, rel_diff(m.local, t.local));
    }
    BOOST_TEST_MESSAGE("  " << theirs.size() << " tensors, max rel diff to the sharded path " << worst);
    MPIACCEL_CHECK_ALL(worst <= 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(what_the_sharded_path_defines_keeps_it) {
  const std::vector<std::vector<std::string>> kept = {
      {"distributed.strategy=fsdp", "distributed.mixed_precision=bf16"},
      {"distributed.strategy=fsdp", "fsdp.cpu_offload=true"},
      {"distributed.strategy=zero", "zero.stage=2", "zero.offload_optimizer=cpu"},
      {"distributed.strategy=zero", "zero.stage=3", "zero.quantized_weights=true"},
      {"distributed.strategy=ddp"},
  };
  for (const auto& overrides : kept) {
    bool one_process = true;
    const std::unique_ptr<Strategy> s =
        mpiaccel::detail::make_run_strategy(Config::defaults(overrides), world_ptr(), &one_process);
    BOOST_TEST_MESSAGE(overrides.back() << ": " << s->name() << ", one process " << one_process);
    MPIACCEL_CHECK_ALL(!one_process);
  }
}
