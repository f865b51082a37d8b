// ctest: links mpiaccel; np 1 2 3; timeout 120
// GradSync, the backward state machine the DDP reducer, ZeRO-2 and FSDP share
// (src/grad_sync/grad_sync.hpp), driven through real autograd and real MPI by the
// smallest policy there is: every bucket's gradients are summed over the
// ranks by one all-reduce per parameter. What the engine promises is checked
// by what the policy sees: the calls, their order and the sums.
#define BOOST_TEST_MODULE grad_sync
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "grad_sync/grad_sync.hpp"
#include "support/scratch_dir.hpp"

using namespace mpiaccel;
using mpiaccel::detail::GradSync;
using mpiaccel::detail::GradSyncOptions;
using mpiaccel::detail::MissingGradients;
using mpiaccel::test::contains;
using mpiaccel::test::world;
using mpiaccel::test::world_ptr;

namespace {

std::vector<std::string> names_of(size_t n) {
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back("w" + std::to_string(i));
  return names;
}

// Sums each gradient over the ranks and writes the sum into .grad.
class SummingSync final : public GradSync {
 public:
  struct Launch {
    size_t bucket;
    size_t staged_before;  // gradients staged when it launched
  };

  SummingSync(const std::vector<at::Tensor>& params, std::vector<std::vector<size_t>> buckets,
              GradSyncOptions options)
      : GradSync(params, names_of(params.size()), world_ptr(), std::move(options)),
        sent_(params.size()) {
    set_buckets(std::move(buckets));
    start_hooks();
  }
  ~SummingSync() override { stop_hooks(); }

  std::vector<Launch> launches;
  std::vector<size_t> unsynced;
  std::vector<int32_t> last_used;
  size_t staged = 0;

 private:
  void stage(size_t i) override {
    ++staged;
    const at::Tensor& grad = grad_params()[i].grad();
    sent_[i] = grad.defined() ? grad.detach().clone() : at::zeros_like(grad_params()[i]).detach();
  }
  void launch(size_t bucket) override {
    launches.push_back({bucket, staged});
    for (size_t i : bucket_params(bucket)) works_.push_back(world().all_reduce_async(sent_[i], ReduceOp::Sum));
  }
  void finish_buckets() override {
    wait_all(works_);
    works_.clear();
  }
  void apply(const std::vector<int32_t>& global_used) override {
    last_used = global_used;
    for (size_t i = 0; i < sent_.size(); ++i)
      if (global_used[i] != 0) grad_params()[i].mutable_grad() = sent_[i];
  }
  void on_unsynced_grad(size_t i) override { unsynced.push_back(i); }

  std::vector<at::Tensor> sent_;
  std::vector<WorkHandle> works_;
};

std::vector<at::Tensor> make_params() {
  std::vector<at::Tensor> params;
  for (int i = 0; i < 3; ++i)
    params.push_back((at::arange(4, at::kDouble) * 0.1 + 0.5 + i).requires_grad_());
  return params;
}

// A chain w0 -> w1 -> w2: backward makes w2's gradient first, w0's last.
// `skip` leaves that parameter out (it gets no gradient).
at::Tensor chain_loss(const std::vector<at::Tensor>& w, double x, int skip = -1) {
  at::Tensor h = at::full({4}, x, at::kDouble);
  for (int i = 0; i < 3; ++i)
    if (i != skip) h = at::tanh(h) * w[static_cast<size_t>(i)];
  return h.sum();
}

double rank_input() { return 0.3 + 0.2 * world().rank(); }

// The sum over ranks of each rank's own gradient, computed without the engine.
std::vector<at::Tensor> expected_sums(const std::vector<at::Tensor>& w, int skip = -1) {
  std::vector<at::Tensor> inputs;
  for (int i = 0; i < 3; ++i)
    if (i != skip) inputs.push_back(w[static_cast<size_t>(i)]);
  const auto local = torch::autograd::grad({chain_loss(w, rank_input(), skip)}, inputs);
  std::vector<at::Tensor> sums;
  size_t k = 0;
  for (int i = 0; i < 3; ++i) {
    at::Tensor g = i == skip ? at::zeros({4}, at::kDouble) : local[k++].clone();
    world().all_reduce(g, ReduceOp::Sum);
    sums.push_back(g);
  }
  return sums;
}

GradSyncOptions forbid() {
  GradSyncOptions options;
  options.owner = "TEST";
  options.missing = MissingGradients::Forbid;
  options.missing_advice = "make the loss depend on every parameter";
  return options;
}

GradSyncOptions allow(bool reuse_used_map = false) {
  GradSyncOptions options;
  options.owner = "TEST";
  options.missing = MissingGradients::Allow;
  options.reuse_used_map = reuse_used_map;
  return options;
}

bool all_close(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& expected) {
  bool ok = true;
  for (size_t i = 0; i < params.size(); ++i)
    ok = ok && params[i].grad().defined() && at::allclose(params[i].grad(), expected[i], 1e-12, 1e-12);
  return ok;
}

std::vector<std::pair<size_t, size_t>> pairs(const std::vector<SummingSync::Launch>& launches) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& l : launches) out.emplace_back(l.bucket, l.staged_before);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(buckets_launch_in_index_order_whatever_order_they_fill) {
  at::set_num_threads(1);
  using Order = std::vector<std::pair<size_t, size_t>>;
  // (buckets, expected (bucket, gradients staged when it launched)).
  const std::vector<std::pair<std::vector<std::vector<size_t>>, Order>> cases = {
      {{{2}, {1}, {0}}, {{0, 1}, {1, 2}, {2, 3}}},  // filled in index order: each launches at once
      {{{0}, {1}, {2}}, {{0, 3}, {1, 3}, {2, 3}}},  // bucket 0 fills last: all wait for it
      {{{1, 2}, {0}}, {{0, 2}, {1, 3}}},
  };
  for (const auto& [buckets, expected] : cases) {
    const auto w = make_params();
    const auto sums = expected_sums(w);
    SummingSync sync(w, buckets, forbid());
    chain_loss(w, rank_input()).backward();
    sync.after_backward();
    MPIACCEL_CHECK_ALL(pairs(sync.launches) == expected);
    MPIACCEL_CHECK_ALL(all_close(w, sums));
    MPIACCEL_CHECK_ALL(sync.iterations() == 1);
    MPIACCEL_CHECK_ALL((sync.observed_order() == std::vector<size_t>{2, 1, 0}));
  }
}

BOOST_AUTO_TEST_CASE(forbid_a_missing_gradient_is_one_error_on_every_rank_then_recovers) {
  at::set_num_threads(1);
  const auto w = make_params();
  SummingSync sync(w, {{2}, {1}, {0}}, forbid());
  std::string message;
  try {
    chain_loss(w, rank_input(), world().rank() == 0 ? 1 : -1).backward();  // rank 0 skips w1
    sync.after_backward();
  } catch (const Error& e) {
    message = e.message();
  }
  for (const std::string& other : world().all_gather_bytes(message)) MPIACCEL_CHECK_ALL(other == message);
  MPIACCEL_CHECK_ALL(contains(message, "rank 0: parameter w1 received no gradient in this step: "
                                       "make the loss depend on every parameter"));
  // Every bucket still went out (w1's slot as zeros), so no rank was left waiting.
  MPIACCEL_CHECK_ALL(sync.launches.size() == 3);
  // The next step, with every parameter used everywhere, is a normal one.
  for (const at::Tensor& p : w) p.mutable_grad() = at::Tensor();
  const auto sums = expected_sums(w);
  sync.launches.clear();
  chain_loss(w, rank_input()).backward();
  sync.after_backward();
  MPIACCEL_CHECK_ALL(all_close(w, sums));
  MPIACCEL_CHECK_ALL(sync.iterations() == 1);
}

BOOST_AUTO_TEST_CASE(allow_sends_every_bucket_and_leaves_gradients_no_rank_had) {
  at::set_num_threads(1);
  const int world_size = world().size();
  const auto w = make_params();
  SummingSync sync(w, {{2}, {1}, {0}}, allow());
  // Rank 0 skips w1 (with one rank, no rank has it).
  const int skip = world().rank() == 0 ? 1 : -1;
  const auto sums = expected_sums(w, skip);
  chain_loss(w, rank_input(), skip).backward();
  sync.after_backward();
  MPIACCEL_CHECK_ALL((sync.last_used == std::vector<int32_t>{world_size, world_size - 1, world_size}));
  MPIACCEL_CHECK_ALL(sync.launches.size() == 3);
  MPIACCEL_CHECK_ALL(at::allclose(w[0].grad(), sums[0]) && at::allclose(w[2].grad(), sums[2]));
  // Used by some rank: the sum of those that had it. Used by none: untouched (undefined).
  if (world_size > 1) MPIACCEL_CHECK_ALL(at::allclose(w[1].grad(), sums[1]));
  else MPIACCEL_CHECK_ALL(!w[1].grad().defined());
}

BOOST_AUTO_TEST_CASE(reuse_used_map_keeps_the_first_steps_map) {
  at::set_num_threads(1);
  const int world_size = world().size();
  const auto w = make_params();
  SummingSync sync(w, {{2}, {1}, {0}}, allow(/*reuse_used_map=*/true));
  chain_loss(w, rank_input(), 1).backward();  // every rank skips w1
  sync.after_backward();
  MPIACCEL_CHECK_ALL((sync.last_used == std::vector<int32_t>{world_size, 0, world_size}));
  chain_loss(w, rank_input()).backward();  // now w1 is used, but the map is the first one
  sync.after_backward();
  MPIACCEL_CHECK_ALL((sync.last_used == std::vector<int32_t>{world_size, 0, world_size}));
}

BOOST_AUTO_TEST_CASE(no_sync_sends_nothing_and_the_next_sync_sends_the_sums) {
  at::set_num_threads(1);
  const auto w = make_params();
  SummingSync sync(w, {{2}, {1}, {0}}, forbid());
  // Expected: the sum over ranks of two backwards' accumulated gradients.
  auto twice = expected_sums(w);
  for (at::Tensor& g : twice) g.mul_(2);
  sync.set_gradient_sync(false);
  chain_loss(w, rank_input()).backward();
  sync.after_backward();
  MPIACCEL_CHECK_ALL(sync.launches.empty() && sync.staged == 0);
  MPIACCEL_CHECK_ALL((sync.unsynced == std::vector<size_t>{2, 1, 0}));
  MPIACCEL_CHECK_ALL(sync.iterations() == 0);
  sync.set_gradient_sync(true);
  chain_loss(w, rank_input()).backward();
  sync.after_backward();
  MPIACCEL_CHECK_ALL(sync.launches.size() == 3);
  MPIACCEL_CHECK_ALL(all_close(w, twice));
  MPIACCEL_CHECK_ALL(sync.iterations() == 1);
}

BOOST_AUTO_TEST_CASE(a_rank_whose_loss_reaches_no_parameter_joins_through_after_backward) {
  at::set_num_threads(1);
  const bool idle = world().size() > 1 && world().rank() == world().size() - 1;
  const auto w = make_params();
  SummingSync sync(w, {{2}, {1}, {0}}, allow());
  std::vector<at::Tensor> sums;
  {
    const auto local = torch::autograd::grad({chain_loss(w, rank_input())}, w);
    for (const at::Tensor& g : local) {
      at::Tensor contribution = idle ? at::zeros_like(g) : g.clone();
      world().all_reduce(contribution, ReduceOp::Sum);
      sums.push_back(contribution);
    }
  }
  at::Tensor loss = idle ? (at::ones({1}, at::kDouble).requires_grad_() * 2).sum()
                         : chain_loss(w, rank_input());
  loss.backward();
  sync.after_backward();  // the idle rank's engine finishes its hook-less backward here
  MPIACCEL_CHECK_ALL(all_close(w, sums));
  MPIACCEL_CHECK_ALL(sync.iterations() == 1);
}

BOOST_AUTO_TEST_CASE(sync_cannot_change_during_a_backward_and_buckets_must_cover_every_parameter) {
  const auto w = make_params();
  BOOST_CHECK_THROW(SummingSync(w, {{2}, {1}}, forbid()), Error);
  BOOST_CHECK_THROW(SummingSync(w, {{2, 1}, {1, 0}}, forbid()), Error);
  SummingSync sync(w, {{2}, {1}, {0}}, forbid());
  std::string message;
  // A tensor hook on w1's gradient runs inside backward, before the engine's callback.
  w[1].register_hook([&](const at::Tensor&) {
    try {
      sync.set_gradient_sync(false);
    } catch (const Error& e) {
      message = e.message();
    }
  });
  chain_loss(w, rank_input()).backward();
  sync.after_backward();
  MPIACCEL_CHECK_ALL(contains(message, "TEST: gradient sync cannot change during a backward pass"));
  MPIACCEL_CHECK_ALL(sync.gradient_sync());
}
