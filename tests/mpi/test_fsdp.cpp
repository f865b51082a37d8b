// ctest: links mpiaccel; np 1 2 3 4; timeout 300
// FSDP equivalence: N ranks with per-rank batch B/N reproduce single-process
// training with batch B (losses, shard rows and the gathered model after 10
// steps within 1e-5 relative, fp32) on the bundled GPT and MLP, for each wrap
// policy, with and without resharding after forward, with gradient
// accumulation (no_sync), each prefetch setting and cpu_offload; the memory account; and
// loading a state dict into FSDP. np 3 gives uneven shards.
#define BOOST_TEST_MODULE fsdp
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>

#include "fsdp/fsdp_strategy.hpp"
#include "state/optimizer_state.hpp"
#include "support/equivalence.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 1e-5;

// FSDP on the bundled `model` (24 rows a step), its optimizer grouped as the trainer does.
Trial fsdp_trial(const FsdpConfig& fsdp, const std::string& model = "gpt",
                 const std::string& optimizer = "sgd") {
  Trial t = bundled_trial(model, decay_groups(optimizer), 24);
  t.strategy = fsdp_plug(fsdp);
  return t;
}

TrialRun expect_equivalent(const Trial& trial, const char* what) {
  at::set_num_threads(1);
  TrialRun run = run_trial(trial, world_ptr());
  const FsdpInfo info = fsdp_info(*run.strategy);
  BOOST_TEST_MESSAGE(what << ": np " << world().size() << ": max loss rel diff "
                          << run.max_loss_rel << ", shard rows " << run.max_shard_rel
                          << ", gathered model " << run.max_full_rel << ", units "
                          << info.units.size());
  MPIACCEL_CHECK_ALL(run.max_loss_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(run.max_shard_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(run.max_full_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(run.compared > 0);
  MPIACCEL_CHECK_ALL(info.iterations == trial.steps);
  MPIACCEL_CHECK_ALL(info.shard_group_size == world().size());
  return run;
}

std::vector<std::string> unit_names(const FsdpInfo& info) {
  std::vector<std::string> names;
  for (const FsdpUnitInfo& u : info.units) names.push_back(u.name);
  return names;
}

// Every non-root unit the model runs is managed and, between steps, holds no
// full parameter memory.
bool units_resharded(Strategy& strategy) {
  auto& engine = dynamic_cast<mpiaccel::detail::FsdpStrategy&>(strategy).engine();
  for (const auto& u : engine.units()) {
    if (!u.module) continue;
    if (!u.managed || u.gathered) return false;
    for (size_t p : u.params)
      if (engine.params()[p].full.storage().nbytes() != 0) return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt_transformer_wrap_full_shard) {
  TrialRun run = expect_equivalent(fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer")),
                                   "gpt DecoderLayer units, reshard");
  const FsdpInfo info = fsdp_info(*run.strategy);
  MPIACCEL_CHECK_ALL((unit_names(info) == std::vector<std::string>{"", "blocks.0", "blocks.1"}));
  MPIACCEL_CHECK_ALL(units_resharded(*run.strategy));
  MPIACCEL_CHECK_ALL(run.strategy->name() == "fsdp");
}

BOOST_AUTO_TEST_CASE(gpt_transformer_wrap_keep_params_until_backward) {
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer", /*reshard=*/false));
  TrialRun run = expect_equivalent(t, "gpt DecoderLayer units, no reshard after forward");
  MPIACCEL_CHECK_ALL(units_resharded(*run.strategy));
}

BOOST_AUTO_TEST_CASE(gpt_shard_grad_op) {
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"));
  t.strategy.config.fsdp.sharding_strategy = ShardingStrategy::ShardGradOp;
  expect_equivalent(t, "gpt SHARD_GRAD_OP");
}

BOOST_AUTO_TEST_CASE(gpt_cpu_offload) {
  // Shards, gradients and optimizer state on the host. On this CPU-only
  // machine the parameters are host tensors too, so this runs the offload
  // code path (host shard buffers, device-side gather/reduce buffers) with
  // copies that stay on one device.
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"));
  t.steps = 4;
  t.strategy.config.fsdp.cpu_offload = true;
  TrialRun run = expect_equivalent(t, "gpt cpu_offload");
  bool host = true;
  for (const auto& group : run.optimizer->param_groups())
    for (const auto& p : group.params()) host = host && p.device().is_cpu();
  MPIACCEL_CHECK_ALL(host);
}

BOOST_AUTO_TEST_CASE(gpt_size_based_wrap) {
  // A DecoderLayer (n_embd 32) holds 12 704 parameters, its FeedForward 8 352.
  Trial t = fsdp_trial(fsdp_config("SIZE_BASED_WRAP"));
  t.strategy.config.fsdp.min_num_params = 9000;
  TrialRun run = expect_equivalent(t, "gpt SIZE_BASED_WRAP 9000");
  MPIACCEL_CHECK_ALL(
      (unit_names(fsdp_info(*run.strategy)) == std::vector<std::string>{"", "blocks.0", "blocks.1"}));
  MPIACCEL_CHECK_ALL(units_resharded(*run.strategy));
}

BOOST_AUTO_TEST_CASE(gpt_no_wrap) {
  TrialRun run = expect_equivalent(fsdp_trial(fsdp_config("NO_WRAP")), "gpt NO_WRAP");
  MPIACCEL_CHECK_ALL(fsdp_info(*run.strategy).units.size() == 1u);
}

BOOST_AUTO_TEST_CASE(gpt_accumulation_no_sync) {
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"));
  t.accum = 2;
  expect_equivalent(t, "gpt accumulation 2");
}

BOOST_AUTO_TEST_CASE(gpt_prefetch_settings) {
  for (const char* prefetch : {"BACKWARD_POST", "NO_PREFETCH"}) {
    Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"));
    t.steps = 4;
    t.strategy.config.fsdp.backward_prefetch = choice_named<BackwardPrefetch>(prefetch, "backward_prefetch");
    t.strategy.config.fsdp.forward_prefetch = std::string(prefetch) == "BACKWARD_POST";
    expect_equivalent(t, prefetch);
  }
}

BOOST_AUTO_TEST_CASE(mlp_transformer_wrap_adamw) {
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "MlpBlock"), "mlp", "adamw");
  TrialRun run = expect_equivalent(t, "mlp MlpBlock units, adamw");
  MPIACCEL_CHECK_ALL(units_resharded(*run.strategy));
}

BOOST_AUTO_TEST_CASE(mlp_size_based_wrap_picks_the_block) {
  // blocks.0 (784·32 + 32) qualifies, blocks.1 (32·32 + 32) does not; its Linear holds the same parameters, so
  // the block, the module the MLP runs through units().run, is the unit.
  Trial t = fsdp_trial(fsdp_config("SIZE_BASED_WRAP"), "mlp", "adamw");
  t.accum = 2;
  t.strategy.config.fsdp.min_num_params = 2000;
  TrialRun run = expect_equivalent(t, "mlp SIZE_BASED_WRAP 2000, accumulation 2");
  MPIACCEL_CHECK_ALL((unit_names(fsdp_info(*run.strategy)) == std::vector<std::string>{"", "blocks.0"}));
}

BOOST_AUTO_TEST_CASE(unit_never_run_stays_gathered) {
  // FeedForward is a unit the GPT never runs through units().run: it stays
  // gathered (re-gathered after each step) and training is still exact.
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer, FeedForward"));
  t.steps = 4;
  TrialRun run = expect_equivalent(t, "gpt DecoderLayer + FeedForward units");
  const FsdpInfo info = fsdp_info(*run.strategy);
  int unrun = 0;
  for (const FsdpUnitInfo& u : info.units)
    if (u.module_class == "FeedForward") unrun += (!u.managed && u.gathered) ? 1 : 0;
  MPIACCEL_CHECK_ALL(unrun == 2);
}

BOOST_AUTO_TEST_CASE(memory_account) {
  at::set_num_threads(1);
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"), "gpt", "adamw");
  t.steps = 2;
  TrialRun run = run_trial(t, world_ptr());
  const FsdpInfo info = fsdp_info(*run.strategy);
  const auto account = run.strategy->memory(*run.optimizer);
  const int n = world().size();
  const int64_t psi = parameter_count(*as_model(run.model)) * 4;  // fp32 bytes
  // fp32 model states: params Ψ, grads Ψ, AdamW 2Ψ, all divided over N, plus
  // the root unit, which stays gathered between steps.
  const double expected = 4.0 * double(psi) / n + double(info.resident_full_bytes);
  const double total = double(account.param_bytes + account.grad_bytes + account.optimizer_bytes);
  BOOST_TEST_MESSAGE("np " << n << ": params " << account.param_bytes << ", grads "
                           << account.grad_bytes << ", optimizer " << account.optimizer_bytes
                           << " bytes; formula 4Ψ/N + root = " << expected << " (Ψ = " << psi
                           << " bytes); largest unit " << info.largest_unit_bytes << ", root "
                           << info.resident_full_bytes);
  MPIACCEL_CHECK_ALL(std::abs(total - expected) <= 0.1 * expected);
  MPIACCEL_CHECK_ALL(account.optimizer_bytes > 0);
  // A DecoderLayer of n_embd 32 holds 12 704 fp32 parameters.
  MPIACCEL_CHECK_ALL(info.largest_unit_bytes == 12704 * 4);
  MPIACCEL_CHECK_ALL(info.resident_full_bytes == (256 * 32 + 16 * 32 + 2 * 32) * 4);
  MPIACCEL_CHECK_ALL(units_resharded(*run.strategy));
}

BOOST_AUTO_TEST_CASE(load_a_single_process_state_dict) {
  // Load the reference (trained 3 steps in one process) into a fresh FSDP
  // model through load_targets/finish_load, as a checkpoint would, then train
  // both 3 more steps: they must agree (model, optimizer slots and step).
  // The MLP: AdamW turns the GPT key bias's zero-in-theory gradient into
  // full-size steps of random sign, in the reference and FSDP alike.
  at::set_num_threads(1);
  const int n = world().size(), rank = world().rank();
  constexpr int64_t kBatch = 24;
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "MlpBlock"), "mlp", "adamw");
  t.steps = 3;
  TrialRun base = run_trial(t, world_ptr());
  auto& ref = *as_model(base.reference);
  auto& ref_opt = *base.reference_optimizer;
  std::map<std::string, torch::Tensor> source;
  for (const auto& item : ref.module().named_parameters()) {
    source["model/" + item.key()] = item.value().detach();
    for (const auto& slot : optimizer_slots(ref_opt, item.value()))
      source["optim/" + item.key() + "/" + slot.name] = slot.tensor;
    source["optim/" + item.key() + "/step"] =
        torch::scalar_tensor(optimizer_param_step(ref_opt, item.value()), torch::kLong);
  }

  torch::manual_seed(4242 + rank);
  auto model = make_model("mlp", small_spec("mlp"));
  auto opt = decay_groups("adamw")(model->module());
  auto strategy = make_fsdp_strategy(t.strategy.config.fsdp, world_ptr());
  strategy->prepare(as_module(model), opt);
  ShardedStateDict targets = strategy->load_targets(*opt);
  bool all_found = true;
  for (ShardedTensor& target : targets.tensors) {
    auto it = source.find(target.name);
    if (it == source.end()) {
      all_found = false;
      continue;
    }
    torch::Tensor rows = it->second.dim() == 0 ? it->second.reshape({1}) : it->second;
    torch::NoGradGuard no_grad;
    target.local.copy_(rows.narrow(0, target.row_begin, target.row_count).view_as(target.local));
  }
  strategy->finish_load(*opt);
  MPIACCEL_CHECK_ALL(all_found);
  MPIACCEL_CHECK_ALL(optimizer_step(*opt) == 3);

  double worst = 0;
  for (int step = 3; step < 6; ++step) {
    auto [x, y] = bundled_batch("mlp", step, kBatch);
    const int64_t rows = kBatch / n;
    ref_opt.zero_grad();
    double ref_total = 0;
    for (int r = 0; r < n; ++r) {
      auto loss = ref.loss(ref.forward(x.narrow(0, r * rows, rows)), y.narrow(0, r * rows, rows)) / n;
      loss.backward();
      ref_total += loss.item<double>();
    }
    ref_opt.step();
    strategy->zero_grad(*opt);
    auto loss = model->loss(model->forward(x.narrow(0, rank * rows, rows)), y.narrow(0, rank * rows, rows));
    loss.backward();
    strategy->after_backward();
    strategy->step(*opt);
    const double global = world().all_reduce_scalar(loss.item<double>(), ReduceOp::Sum) / n;
    worst = std::max(worst, std::abs(global - ref_total) / std::abs(ref_total));
  }
  int64_t compared = 0;
  const double rows_diff = max_rows_diff(strategy->state_dict(*opt), ref.module(), &compared);
  BOOST_TEST_MESSAGE("np " << n << ": after loading, loss rel diff " << worst << ", shard rows "
                           << rows_diff);
  MPIACCEL_CHECK_ALL(worst <= kTolerance);
  MPIACCEL_CHECK_ALL(rows_diff <= kTolerance);
  MPIACCEL_CHECK_ALL(compared > 0);
}

BOOST_AUTO_TEST_CASE(state_dict_rows_cover_every_tensor_once) {
  // Summed over ranks, every saved tensor's rows add up to its dim 0 (the
  // checkpoint writes each row exactly once); names are those of DDP.
  at::set_num_threads(1);
  Trial t = fsdp_trial(fsdp_config("TRANSFORMER_BASED_WRAP", "DecoderLayer"), "gpt", "adamw");
  t.steps = 1;
  TrialRun run = run_trial(t, world_ptr());
  const ShardedStateDict dict = run.strategy->state_dict(*run.optimizer);
  bool ok = !dict.tensors.empty();
  for (const ShardedTensor& s : dict.tensors) {
    const int64_t rows = s.global_shape.empty() ? 1 : s.global_shape[0];
    const int64_t total = world().all_reduce_int(s.row_count, ReduceOp::Sum);
    ok = ok && total == rows && s.local.size(0) == s.row_count;
  }
  bool has_slot = false;
  for (const ShardedTensor& s : dict.tensors) has_slot = has_slot || s.name == "optim/blocks.0.attn.qkv.weight/exp_avg";
  MPIACCEL_CHECK_ALL(ok);
  MPIACCEL_CHECK_ALL(has_slot);
}
