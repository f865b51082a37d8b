// ctest: links mpiaccel; np 1 2 3 4; timeout 180
// Context parallelism's attention over the whole world as the cp group,
// against causal attention of the whole sequence computed on every rank from
// the same seed: ring and all-to-all (Ulysses) give each rank its zigzag
// shard of the output, and their backward gives its shard of the gradients
// of q, k and v, within 1e-5, for float32 and (looser) bfloat16, with as many
// key/value heads as query heads and with fewer (grouped-query attention). The block
// kernel with its log-sum-exp agrees with the explicit product. The layout:
// every position on exactly one rank, ranks holding equal work. The
// all-to-all collective moves block p to rank p.
#define BOOST_TEST_MODULE context_parallel
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "context_parallel/block_attention.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/context_parallel.hpp"
#include "mpiaccel/error.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

double distance(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().max().item<double>() /
         std::max(1.0, b.to(at::kFloat).abs().max().item<double>());
}

// Whole q, k, v [B, H, T, D] and an output gradient, the same on every rank.
struct Inputs {
  at::Tensor q, k, v, dout;
};

Inputs inputs(int64_t heads, int64_t kv_heads, int64_t time, at::ScalarType dtype) {
  torch::manual_seed(11);
  auto draw = [&](int64_t h) { return at::randn({2, h, time, 8}).to(dtype); };
  Inputs in{draw(heads), draw(kv_heads), draw(kv_heads), draw(heads)};
  return in;
}

// Causal attention of the whole sequence in float64; grouped-query key/value
// heads each serve q.size(1) / k.size(1) consecutive query heads.
at::Tensor whole_attention(const at::Tensor& q, const at::Tensor& key, const at::Tensor& value) {
  const at::Tensor k = key.repeat_interleave(q.size(1) / key.size(1), 1);
  const at::Tensor v = value.repeat_interleave(q.size(1) / value.size(1), 1);
  const double scale = 1.0 / std::sqrt(double(q.size(-1)));
  const at::Tensor s = at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-2, -1)) * scale;
  const at::Tensor future = at::ones({q.size(2), q.size(2)}, at::kBool).triu(1);
  return at::matmul(at::softmax(s.masked_fill(future, -INFINITY), -1), v.to(at::kDouble));
}

// The cp attention of each rank's shard against the whole, forward and backward.
void check_against_whole(cp::Exchange exchange, int64_t heads, int64_t kv_heads, at::ScalarType dtype,
                         double tolerance) {
  const auto group = world_ptr();
  const int64_t time = 12 * group->size();
  const Inputs in = inputs(heads, kv_heads, time, dtype);
  // The reference in float64, its gradients by autograd.
  at::Tensor q = in.q.to(at::kDouble).requires_grad_(), k = in.k.to(at::kDouble).requires_grad_(),
             v = in.v.to(at::kDouble).requires_grad_();
  whole_attention(q, k, v).backward(in.dout.to(at::kDouble));
  auto shard = [&](const at::Tensor& x) { return cp::zigzag_shard(x, 2, *group); };
  at::Tensor mq = shard(in.q).detach().requires_grad_(), mk = shard(in.k).detach().requires_grad_(),
             mv = shard(in.v).detach().requires_grad_();
  const at::Tensor out = cp::causal_attention(mq, mk, mv, group, exchange);
  BOOST_TEST(out.scalar_type() == dtype);
  BOOST_TEST(distance(out, shard(whole_attention(in.q, in.k, in.v))) < tolerance);
  out.backward(shard(in.dout));
  BOOST_TEST(distance(mq.grad(), shard(q.grad())) < tolerance);
  BOOST_TEST(distance(mk.grad(), shard(k.grad())) < tolerance);
  BOOST_TEST(distance(mv.grad(), shard(v.grad())) < tolerance);
}

}  // namespace

BOOST_AUTO_TEST_CASE(zigzag_layout_covers_every_position_once_with_equal_work) {
  const auto group = world_ptr();
  const int64_t n = group->size(), time = 4 * n;
  const at::Tensor mine = cp::zigzag_positions(time, *group, at::TensorOptions());
  BOOST_TEST(mine.size(0) == time / n);
  // Chunks r and 2n-1-r: the causal work (sum of positions + 1) is the same on every rank.
  const double work = (mine + 1).sum().item<double>();
  BOOST_TEST(group->all_reduce_scalar(work, ReduceOp::Max) == group->all_reduce_scalar(work, ReduceOp::Min));
  at::Tensor seen = at::zeros({time}, at::kLong);
  seen.index_add_(0, mine, at::ones({mine.size(0)}, at::kLong));
  group->all_reduce(seen, ReduceOp::Sum);
  BOOST_TEST(at::equal(seen, at::ones({time}, at::kLong)));
  // The shard of a tensor is the tensor at those positions.
  const at::Tensor x = at::arange(time).view({1, time});
  BOOST_TEST(at::equal(cp::zigzag_shard(x, 1, *group).view({-1}), mine));
  BOOST_CHECK_EXCEPTION(cp::zigzag_shard(at::zeros({1, 2 * n + 1}), 1, *group), Error, [&](const Error& e) {
    return std::string(e.what()).find("make [train] seq_len a multiple of " + std::to_string(2 * n)) !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(block_kernel_with_log_sum_exp_equals_the_explicit_product) {
  torch::manual_seed(5);
  const at::Tensor q = at::randn({2, 3, 10, 8}), k = at::randn({2, 3, 10, 8}), v = at::randn({2, 3, 10, 8});
  for (bool causal : {false, true}) {
    const cp::detail::Partial p = cp::detail::block_attention(q, k, v, causal);
    const double scale = 1.0 / std::sqrt(8.0);
    at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * scale;
    if (causal) s = s.masked_fill(at::ones({10, 10}, at::kBool).triu(1), -INFINITY);
    BOOST_TEST(distance(p.lse, at::logsumexp(s, -1)) < 1e-5);
    BOOST_TEST(distance(p.out, at::matmul(at::softmax(s, -1), v)) < 1e-5);
    // Backward given the block's own output and lse: autograd's gradients.
    at::Tensor gq = q.clone().requires_grad_(), gk = k.clone().requires_grad_(), gv = v.clone().requires_grad_();
    at::Tensor sg = at::matmul(gq, gk.transpose(-2, -1)) * scale;
    if (causal) sg = sg.masked_fill(at::ones({10, 10}, at::kBool).triu(1), -INFINITY);
    const at::Tensor dout = at::randn({2, 3, 10, 8});
    at::matmul(at::softmax(sg, -1), gv).backward(dout);
    const cp::detail::BlockGrads g = cp::detail::block_attention_backward(dout, q, k, v, p.out, p.lse, causal);
    BOOST_TEST(distance(g.dq, gq.grad()) < 1e-5);
    BOOST_TEST(distance(g.dk, gk.grad()) < 1e-5);
    BOOST_TEST(distance(g.dv, gv.grad()) < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(ring_attention_equals_whole_causal_attention) {
  check_against_whole(cp::Exchange::Ring, 3, 3, at::kFloat, 1e-5);
  check_against_whole(cp::Exchange::Ring, 2, 2, at::kBFloat16, 3e-2);
  // Grouped-query attention: 2 key/value heads travel for 6 query heads.
  check_against_whole(cp::Exchange::Ring, 6, 2, at::kFloat, 1e-5);
}

BOOST_AUTO_TEST_CASE(all_to_all_attention_equals_whole_causal_attention) {
  const int64_t heads = 12;  // divides by 1, 2, 3 and 4 ranks
  check_against_whole(cp::Exchange::AllToAll, heads, heads, at::kFloat, 1e-5);
  check_against_whole(cp::Exchange::AllToAll, heads, heads, at::kBFloat16, 3e-2);
  // 4 key/value heads: swapped unrepeated at 1, 2 and 4 ranks, repeated first at 3.
  check_against_whole(cp::Exchange::AllToAll, heads, 4, at::kFloat, 1e-5);
}

BOOST_AUTO_TEST_CASE(bad_shapes_and_heads_are_refused_in_one_line) {
  const auto group = world_ptr();
  const at::Tensor q = at::zeros({1, 4, 4, 8}), k = at::zeros({1, 3, 4, 8});
  BOOST_CHECK_EXCEPTION(cp::causal_attention(q, k, k, group, cp::Exchange::Ring), Error, [](const Error& e) {
    return std::string(e.what()).find("(heads a multiple of them) of an even length, not [1, 4, 4, 8], [1, 3, 4, 8]") !=
           std::string::npos;
  });
  if (group->size() == 1) return;
  const at::Tensor x = at::zeros({1, group->size() + 1, 4, 8});
  BOOST_CHECK_EXCEPTION(cp::causal_attention(x, x, x, group, cp::Exchange::AllToAll), Error, [&](const Error& e) {
    return std::string(e.what()).find("cp_comm_strategy = alltoall splits the " + std::to_string(group->size() + 1) +
                                      " attention heads of a rank over the " + std::to_string(group->size())) !=
           std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(exchange_names) {
  const auto named = [](const char* text) { return choice_named<cp::Exchange>(text, "[parallelism] cp_comm_strategy"); };
  BOOST_TEST(name_of(named("ring")) == "ring");
  BOOST_TEST(name_of(named("alltoall")) == "alltoall");
  BOOST_CHECK_THROW(named("allgather"), Error);
}
