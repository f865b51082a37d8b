// ctest: links mpiaccel; np 4; timeout 300
// HYBRID_SHARD at np 4: parameters sharded inside 2 groups of 2 ranks
// (hybrid_group_size = 2) and gradients averaged across the groups; training
// reproduces one process within 1e-5, and the saved rows still cover every
// tensor exactly once. hybrid_group_size = 0 (the ranks of one host: here all
// 4) is one group.
#define BOOST_TEST_MODULE fsdp_hybrid
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>

#include "support/equivalence.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 1e-5;

TrialRun expect_equivalent(const Trial& trial, const char* what) {
  at::set_num_threads(1);
  TrialRun run = run_trial(trial, world_ptr());
  BOOST_TEST_MESSAGE(what << ": max loss rel diff " << run.max_loss_rel << ", shard rows "
                          << run.max_shard_rel << ", gathered model " << run.max_full_rel);
  MPIACCEL_CHECK_ALL(run.max_loss_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(run.max_shard_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(run.max_full_rel <= kTolerance);
  return run;
}

// HYBRID_SHARD of the bundled `model` (24 rows a step), its optimizer grouped as the trainer does.
Trial hybrid(int64_t group_size, const std::string& model = "gpt", const std::string& optimizer = "sgd") {
  FsdpConfig c = fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer");
  c.sharding_strategy = ShardingStrategy::HybridShard;
  c.hybrid_group_size = group_size;
  Trial t = bundled_trial(model, decay_groups(optimizer), 24);
  t.strategy = fsdp_plug(c);
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_groups_of_two) {
  require_world_size(4);
  TrialRun run = expect_equivalent(hybrid(2), "gpt hybrid 2x2");
  const FsdpInfo info = fsdp_info(*run.strategy);
  MPIACCEL_CHECK_ALL(info.shard_group_size == 2);
  MPIACCEL_CHECK_ALL(info.replica_groups == 2);
  // The clip norm is the global one: the same on every rank.
  const double norm = run.strategy->grad_norm();
  MPIACCEL_CHECK_ALL(std::abs(world().all_reduce_scalar(norm, ReduceOp::Max) - norm) <= 1e-12 * norm);

  // Replicas split their chunk's rows: every row is saved exactly once.
  const ShardedStateDict dict = run.strategy->state_dict(*run.optimizer);
  bool covered = true;
  for (const ShardedTensor& s : dict.tensors) {
    const int64_t rows = s.global_shape.empty() ? 1 : s.global_shape[0];
    covered = covered && world().all_reduce_int(s.row_count, ReduceOp::Sum) == rows;
  }
  MPIACCEL_CHECK_ALL(covered);
}

BOOST_AUTO_TEST_CASE(two_groups_with_accumulation_and_adamw_mlp) {
  require_world_size(4);
  Trial t = hybrid(2, "mlp", "adamw");
  t.accum = 2;
  t.strategy.config.fsdp.transformer_layer_cls_to_wrap = "MlpBlock";
  expect_equivalent(t, "mlp hybrid 2x2, accumulation 2, adamw");
}

BOOST_AUTO_TEST_CASE(group_of_the_node) {
  require_world_size(4);
  Trial t = hybrid(0);
  t.steps = 4;
  TrialRun run = expect_equivalent(t, "gpt hybrid, one group per host");
  const FsdpInfo info = fsdp_info(*run.strategy);
  MPIACCEL_CHECK_ALL(info.shard_group_size * info.replica_groups == world().size());
}
