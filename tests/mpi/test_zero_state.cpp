// ctest: links mpiaccel; np 1 2 3 4; timeout 300
// ZeRO state dicts have DDP's names and logical shapes, so a checkpoint moves
// between strategies: train 3 steps under A, save (parallel HDF5), load into a
// fresh model under B, train 3 more steps under both; B continues exactly as A
// (losses and parameters within 1e-5 relative). Pairs: ZeRO-2 → DDP,
// DDP → ZeRO-1 with offload, ZeRO-1 → ZeRO-2 with offload. (Other world sizes:
// the checkpoint reader reshards by rows; tests/scripts covers that path.)
#define BOOST_TEST_MODULE zero_state
#include "support/mpi_test.hpp"

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "ddp/ddp_strategy.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/zero.hpp"
#include "state/optimizer_state.hpp"
#include "support/checkpoint_setup.hpp"
#include "support/equivalence.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-5;

struct Run {
  std::shared_ptr<Model> model;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<Strategy> strategy;
};

Run start(const std::string& kind, std::function<std::unique_ptr<Strategy>()> make, uint64_t seed) {
  Run run;
  torch::manual_seed(seed);
  run.model = make_model(kind, small_spec(kind));
  run.optimizer = adamw_small_eps()(run.model->module());
  run.strategy = make();
  run.strategy->prepare(as_module(run.model), run.optimizer);
  return run;
}

// Steps [first, first + count) on 12 rows per step split over the ranks; the mean losses.
std::vector<double> train(Run& run, const std::string& kind, int first, int count) {
  const int n = world().size(), rank = world().rank();
  const int64_t rows = 12 / n;
  std::vector<double> losses;
  for (int step = first; step < first + count; ++step) {
    auto [x, y] = bundled_batch(kind, step, 12);
    run.strategy->zero_grad(*run.optimizer);
    auto loss = run.model->loss(run.model->forward(x.narrow(0, rank * rows, rows)),
                                y.narrow(0, rank * rows, rows));
    loss.backward();
    run.strategy->after_backward();
    run.strategy->step(*run.optimizer);
    losses.push_back(world().all_reduce_scalar(loss.item<double>(), ReduceOp::Sum) / n);
  }
  return losses;
}

void expect_resumes(const std::string& kind, const std::string& from_name,
                    std::function<std::unique_ptr<Strategy>()> from, const std::string& to_name,
                    std::function<std::unique_ptr<Strategy>()> to) {
  at::set_num_threads(1);
  CheckpointDir dir("zero");
  Run a = start(kind, from, 7);
  train(a, kind, 0, 3);
  const std::string path =
      dir.ckpt.save(a.strategy->state_dict(*a.optimizer), 3, meta_at(3, a.strategy->name()));

  Run b = start(kind, to, 99);  // other weights: everything must come from the file
  ShardedStateDict targets = b.strategy->load_targets(*b.optimizer);
  dir.ckpt.load(path, targets);
  b.strategy->finish_load(*b.optimizer);
  MPIACCEL_CHECK_ALL(optimizer_step(*b.optimizer) == 3);

  const auto losses_a = train(a, kind, 3, 3);
  const auto losses_b = train(b, kind, 3, 3);
  double loss_rel = 0, param_rel = 0;
  for (size_t s = 0; s < losses_a.size(); ++s)
    loss_rel = std::max(loss_rel, std::abs(losses_b[s] - losses_a[s]) / std::abs(losses_a[s]));
  auto params_a = a.model->module().named_parameters();
  for (const auto& item : b.model->module().named_parameters()) {
    const auto& r = params_a[item.key()];
    param_rel = std::max(param_rel, (item.value() - r).norm().item<double>() / (r.norm().item<double>() + 1e-30));
  }
  BOOST_TEST_MESSAGE(kind << " " << from_name << " -> " << to_name << ": np " << world().size()
                          << ": max loss rel diff " << loss_rel << ", max param rel diff " << param_rel);
  MPIACCEL_CHECK_ALL(loss_rel <= kTolerance);
  MPIACCEL_CHECK_ALL(param_rel <= kTolerance);
}

std::function<std::unique_ptr<Strategy>()> zero(int stage, bool offload) {
  return [=] { return make_zero_strategy(zero_config(stage, offload), world_ptr()); };
}

std::function<std::unique_ptr<Strategy>()> ddp() {
  return [] { return make_ddp_strategy(DdpConfig{}, world_ptr()); };
}

}  // namespace

BOOST_AUTO_TEST_CASE(zero2_to_ddp) { expect_resumes("gpt", "zero2", zero(2, false), "ddp", ddp()); }

BOOST_AUTO_TEST_CASE(ddp_to_zero1_offload) {
  expect_resumes("gpt", "ddp", ddp(), "zero1 offload", zero(1, true));
}

BOOST_AUTO_TEST_CASE(zero1_to_zero2_offload) {
  expect_resumes("mlp", "zero1", zero(1, false), "zero2 offload", zero(2, true));
}

BOOST_AUTO_TEST_CASE(state_dict_names_match_ddp) {
  // Same tensors (name, global shape, dtype) as DDP after a step, and the
  // ranks' rows of each optimizer slot tile it exactly once.
  at::set_num_threads(1);
  Run z = start("gpt", zero(2, false), 7);
  Run d = start("gpt", ddp(), 7);
  train(z, "gpt", 0, 1);
  train(d, "gpt", 0, 1);
  auto zs = z.strategy->state_dict(*z.optimizer);
  auto ds = d.strategy->state_dict(*d.optimizer);
  std::map<std::string, std::pair<std::vector<int64_t>, at::ScalarType>> zn, dn;
  int64_t zrows = 0, drows = 0;
  for (const auto& t : zs.tensors) {
    zn[t.name] = {t.global_shape, t.local.scalar_type()};
    zrows += t.row_count;
  }
  for (const auto& t : ds.tensors) {
    dn[t.name] = {t.global_shape, t.local.scalar_type()};
    drows += t.row_count;
  }
  MPIACCEL_CHECK_ALL(zn == dn);
  MPIACCEL_CHECK_ALL(zs.attributes == ds.attributes);
  // Summed over ranks, both cover every row of every tensor once.
  MPIACCEL_CHECK_ALL(world().all_reduce_int(zrows, ReduceOp::Sum) == world().all_reduce_int(drows, ReduceOp::Sum));
}
