// ctest: links mpiaccel; np 1 2 3 4; timeout 120
// Splitting a model after it is built (tp::parallelize_module), over the whole
// world as the tp group, against the same model unsplit on every rank:
// a plan by module-name pattern (column- then row-parallel, a fused q, k, v
// projection split block by block), the parameters it reports as split, the
// sequence-parallel collectives (all-gather / reduce-scatter along the
// sequence) and their adjoints, a sequence-parallel MLP on shards (and whole
// inside WholeSequence), the plan's one-line errors, and RegionRng's
// per-rank streams. Outputs and gradients agree within 1e-5. And the
// bundled GPT and Llama split over the world hold exactly what
// estimate-memory's closed form says one rank holds.
#define BOOST_TEST_MODULE tensor_parallel_plan
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <memory>
#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/tensor_parallel.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 1e-5;

double distance(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1.0, b.abs().max().item<double>());
}

// A user's model: two blocks of a fused projection and an MLP, written with
// tp::Linear where it would have torch::nn::Linear.
struct Block : torch::nn::Module {
  Block() {
    qkv = register_module("qkv", std::make_shared<tp::Linear>(12, 3 * 12));
    fc = register_module("fc", std::make_shared<tp::Linear>(12, 24));
    proj = register_module("proj", std::make_shared<tp::Linear>(24, 12));
  }
  // The three blocks of qkv's output summed (this rank's heads of each),
  // through a row-parallel layer of their own: a stand-in for attention.
  at::Tensor forward(const at::Tensor& x) {
    const std::vector<at::Tensor> three = qkv->forward(x).chunk(3, -1);
    const at::Tensor mixed = three[0] * three[1] + three[2];
    return proj->forward(at::gelu(fc->forward(x))) + mixed.sum(-1, true);
  }
  std::shared_ptr<tp::Linear> qkv, fc, proj;
};

struct TwoBlocks : torch::nn::Module {
  TwoBlocks() {
    for (int i = 0; i < 2; ++i) blocks.push_back(register_module("blocks" + std::to_string(i), std::make_shared<Block>()));
  }
  std::vector<std::shared_ptr<Block>> blocks;
};

tp::Plan mlp_plan() {
  tp::Style fused = tp::Style::colwise();
  fused.fused_blocks = 3;
  return {{"blocks*.fc", tp::Style::colwise()}, {"blocks*.proj", tp::Style::rowwise()}, {"blocks*.qkv", fused}};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_plan_splits_a_built_model_by_name) {
  const auto group = world_ptr();
  torch::manual_seed(11);
  auto whole = std::make_shared<TwoBlocks>();
  torch::manual_seed(11);
  auto split = std::make_shared<TwoBlocks>();
  const std::vector<std::string> done = tp::parallelize_module(*split, group, mlp_plan());
  MPIACCEL_CHECK_ALL(done.size() == 6u && done.front() == "blocks0.qkv");

  // The reported splits, and the fused weight held as [3, 12/tp, 12]; a
  // group of one keeps the layers whole.
  const auto splits = tp::split_parameters(*split);
  if (group->size() == 1) {
    MPIACCEL_CHECK_ALL(splits.empty() && split->blocks[0]->qkv->weight.sizes() == at::IntArrayRef({36, 12}));
  } else {
    MPIACCEL_CHECK_ALL(splits.size() == 10u);  // per block: qkv w+b, fc w+b, proj w
    MPIACCEL_CHECK_ALL(splits.at("blocks0.qkv.weight").kind == tp::ParamSplit::Kind::FusedRows);
    MPIACCEL_CHECK_ALL(splits.at("blocks1.proj.weight").kind == tp::ParamSplit::Kind::Columns);
    MPIACCEL_CHECK_ALL(splits.count("blocks1.proj.bias") == 0);
    MPIACCEL_CHECK_ALL(split->blocks[0]->qkv->weight.sizes() == at::IntArrayRef({3, 12 / group->size(), 12}));
  }
  // Each block of the fused weight is the slice of the whole one's block.
  auto fused_slice = [&](const at::Tensor& t) { return tp::local_slice(t.view({3, 12, -1}), 1, *group).reshape({-1}); };
  MPIACCEL_CHECK_ALL(at::equal(split->blocks[0]->qkv->weight.reshape({-1}), fused_slice(whole->blocks[0]->qkv->weight)));

  const at::Tensor x0 = torch::randn({2, 6, 12});
  at::Tensor x = x0.clone().requires_grad_(true), x_tp = x0.clone().requires_grad_(true);
  // The stand-in's sums over qkv's blocks are partial per rank: sum them.
  auto run_split = [&](const at::Tensor& in) {
    const Block& b = *split->blocks[0];
    const std::vector<at::Tensor> three = b.qkv->forward(in).chunk(3, -1);
    const at::Tensor mixed = tp::reduce_from_parallel((three[0] * three[1] + three[2]).sum(-1, true), group);
    return b.proj->forward(at::gelu(b.fc->forward(in))) + mixed;
  };
  const at::Tensor y = whole->blocks[0]->forward(x);
  const at::Tensor y_tp = run_split(x_tp);
  MPIACCEL_CHECK_ALL(distance(y_tp, y) <= kTolerance);
  const at::Tensor upstream = torch::randn(y.sizes());
  y.backward(upstream);
  y_tp.backward(upstream);
  MPIACCEL_CHECK_ALL(distance(x_tp.grad(), x.grad()) <= kTolerance);
  const Block& w = *whole->blocks[0];
  const Block& s = *split->blocks[0];
  MPIACCEL_CHECK_ALL(distance(s.qkv->weight.grad().reshape({-1}), fused_slice(w.qkv->weight.grad())) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(s.qkv->bias.grad().reshape({-1}), fused_slice(w.qkv->bias.grad())) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(s.proj->weight.grad(), tp::local_slice(w.proj->weight.grad(), 1, *group)) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(s.proj->bias.grad(), w.proj->bias.grad()) <= kTolerance);

  // load_full takes the whole weights back into the slices.
  split->blocks[1]->qkv->load_full(whole->blocks[0]->qkv->weight, whole->blocks[0]->qkv->bias);
  MPIACCEL_CHECK_ALL(at::equal(split->blocks[1]->qkv->weight, split->blocks[0]->qkv->weight));
}

BOOST_AUTO_TEST_CASE(sequence_parallel_collectives_and_their_adjoints) {
  const auto group = world_ptr();
  const int64_t ranks = group->size();
  torch::manual_seed(21);  // the same on every rank
  const at::Tensor whole = torch::randn({2, 4 * ranks, 3});
  const at::Tensor shard0 = tp::local_slice(whole, 1, *group).clone();
  at::Tensor shard = shard0.clone().requires_grad_(true);
  const at::Tensor gathered = tp::gather_from_sequence(shard, 1, group);
  MPIACCEL_CHECK_ALL(at::equal(gathered, whole));
  // Every rank's region gives a partial gradient of the whole sequence: the
  // shard's gradient is the sum over ranks of its rows.
  const at::Tensor upstream = whole * (group->rank() + 1);
  gathered.backward(upstream);
  const double rank_sum = ranks * (ranks + 1) / 2.0;
  MPIACCEL_CHECK_ALL(distance(shard.grad(), shard0 * rank_sum) <= kTolerance);

  // Partial sums reduce-scattered: this rank's shard of the sum.
  at::Tensor partial = (whole * (group->rank() + 1)).requires_grad_(true);
  const at::Tensor reduced = tp::reduce_scatter_to_sequence(partial, 1, group);
  MPIACCEL_CHECK_ALL(distance(reduced, shard0 * rank_sum) <= kTolerance);
  reduced.backward(shard0);
  MPIACCEL_CHECK_ALL(at::equal(partial.grad(), tp::gather_from_sequence(shard0, 1, group)));
}

BOOST_AUTO_TEST_CASE(sequence_parallel_mlp_on_shards_equals_the_unsplit_one) {
  const auto group = world_ptr();
  torch::manual_seed(13);
  auto fc = std::make_shared<tp::Linear>(12, 24), proj = std::make_shared<tp::Linear>(24, 12);
  torch::manual_seed(13);
  auto fc_tp = std::make_shared<tp::Linear>(12, 24), proj_tp = std::make_shared<tp::Linear>(24, 12);
  tp::Style colwise = tp::Style::colwise(), rowwise = tp::Style::rowwise();
  colwise.sequence_parallel = rowwise.sequence_parallel = true;
  fc_tp->parallelize(colwise, group);
  proj_tp->parallelize(rowwise, group);

  const at::Tensor x0 = torch::randn({2, 4 * group->size(), 12});
  at::Tensor x = x0.clone().requires_grad_(true);
  at::Tensor shard = tp::local_slice(x0, 1, *group).clone().requires_grad_(true);
  const at::Tensor y = proj->forward(at::gelu(fc->forward(x)));
  const at::Tensor y_shard = proj_tp->forward(at::gelu(fc_tp->forward(shard)));  // this rank's positions
  MPIACCEL_CHECK_ALL(distance(y_shard, tp::local_slice(y, 1, *group)) <= kTolerance);
  const at::Tensor upstream = torch::randn(y.sizes());
  y.backward(upstream);
  y_shard.backward(tp::local_slice(upstream, 1, *group).contiguous());
  MPIACCEL_CHECK_ALL(distance(shard.grad(), tp::local_slice(x.grad(), 1, *group)) <= kTolerance);
  // The bias every rank adds to its own shard: the whole gradient on each.
  MPIACCEL_CHECK_ALL(distance(proj_tp->bias.grad(), proj->bias.grad()) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(fc_tp->weight.grad(), tp::local_slice(fc->weight.grad(), 0, *group)) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(proj_tp->weight.grad(), tp::local_slice(proj->weight.grad(), 1, *group)) <= kTolerance);
  // Inside WholeSequence the same layers take and give whole sequences.
  const tp::WholeSequence whole;
  MPIACCEL_CHECK_ALL(distance(proj_tp->forward(at::gelu(fc_tp->forward(x0))), y) <= kTolerance);
}

BOOST_AUTO_TEST_CASE(a_plan_that_misses_or_hits_a_stock_module_is_one_line) {
  const auto group = world_ptr();
  auto model = std::make_shared<TwoBlocks>();
  auto message_of = [&](const tp::Plan& plan) -> std::string {
    try {
      tp::parallelize_module(*model, group, plan);
    } catch (const Error& e) {
      return e.message();
    }
    return "";
  };
  MPIACCEL_CHECK_ALL(message_of({{"blocks*.attn", tp::Style::colwise()}}).find(
                         "the plan's pattern 'blocks*.attn' matches no module") != std::string::npos);
  struct Stock : torch::nn::Module {
    Stock() { register_module("fc", torch::nn::Linear(4, 4)); }
  };
  auto stock = std::make_shared<Stock>();
  std::string stock_error;
  try {
    tp::parallelize_module(*stock, group, {{"fc", tp::Style::colwise()}});
  } catch (const Error& e) {
    stock_error = e.message();
  }
  MPIACCEL_CHECK_ALL(stock_error.find("a plan splits tp::Linear and tp::Embedding modules") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(region_streams_differ_per_rank_and_leave_the_default_alone) {
  const auto group = world_ptr();
  torch::manual_seed(7);
  tp::RegionRng::seed(7, /*dp_rank=*/0, group->rank(), at::kCPU);
  const at::Tensor before = torch::randn({1});  // the default stream, equal on every rank
  at::Tensor inside;
  {
    tp::RegionRng region(at::kCPU);
    inside = torch::rand({64});
  }
  const at::Tensor after = torch::randn({1});
  // The default stream continued as if the region had drawn nothing.
  torch::manual_seed(7);
  torch::randn({1});
  MPIACCEL_CHECK_ALL(at::equal(after, torch::randn({1})));
  // The regions drew differently on each rank, and the stream moves on.
  const at::Tensor all = at::empty({group->size(), 64});
  group->all_gather(all.view({-1}), inside.contiguous());
  bool distinct = true;
  for (int r = 0; r < group->size(); ++r)
    if (r != group->rank() && at::equal(all[r], inside)) distinct = false;
  MPIACCEL_CHECK_ALL(distinct);
  at::Tensor next;
  {
    tp::RegionRng region(at::kCPU);
    next = torch::rand({64});
  }
  MPIACCEL_CHECK_ALL(!at::equal(next, inside));
  // Outside the regions every rank drew alike (the group's common stream).
  const at::Tensor befores = at::empty({group->size()});
  group->all_gather(befores, before.contiguous());
  MPIACCEL_CHECK_ALL(at::equal(befores, before.expand({group->size()})));
  tp::RegionRng::set_state(at::Tensor());  // later tests: no region stream
}

BOOST_AUTO_TEST_CASE(a_split_bundled_model_holds_what_the_estimate_says) {
  const auto group = world_ptr();
  if (4 % group->size() != 0) return;  // 4 heads
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_kv_head = 2;  // at 4 ranks: each key/value head held whole by 2
  spec.n_embd = 32;
  spec.intermediate_size = 48;
  spec.vocab_size = 64;
  spec.block_size = 16;
  spec.attention_bias = true;
  for (const std::string kind : {"gpt", "llama"}) {
    torch::manual_seed(1);
    std::shared_ptr<Model> model = make_model(kind, spec);
    if (group->size() > 1) tensor_parallelize(*model, group);
    const ModelFootprint counted = count_footprint(*model, model_unit_classes(kind));
    const ModelFootprint closed = model_footprint(kind, spec, group->size());
    MPIACCEL_CHECK_ALL(counted.params == closed.params && counted.root_params == closed.root_params &&
                       counted.largest_unit_params == closed.largest_unit_params &&
                       counted.tensors == closed.tensors);
  }
}
