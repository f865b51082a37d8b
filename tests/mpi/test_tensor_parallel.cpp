// ctest: links mpiaccel; np 1 2 3 4; timeout 120
// Tensor parallelism's building blocks over the whole world as the tp group,
// against the same computation unsplit on every rank (the same weights, from
// the same seed): a column-parallel then row-parallel MLP, a gathered
// column-parallel output, a row-parallel layer fed whole, the vocabulary-
// parallel embedding and cross-entropy (with ignored targets). Outputs, input
// gradients and the weight gradients (this rank's slices of the unsplit ones)
// agree within 1e-5; the layers' initial weights are the unsplit layer's
// slices whatever the number of ranks.
#define BOOST_TEST_MODULE tensor_parallel
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include "mpiaccel/error.hpp"
#include "mpiaccel/tensor_parallel.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

constexpr double kTolerance = 1e-5;

double distance(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1.0, b.abs().max().item<double>());
}

}  // namespace

BOOST_AUTO_TEST_CASE(column_then_row_parallel_mlp_equals_the_unsplit_one) {
  const auto group = world_ptr();
  torch::manual_seed(3);
  torch::nn::Linear fc(24, 48), proj(48, 24);
  torch::manual_seed(3);
  auto fc_tp = std::make_shared<tp::ColumnParallelLinear>(24, 48, group);
  auto proj_tp = std::make_shared<tp::RowParallelLinear>(48, 24, group);
  // The constructors drew what the unsplit layers drew: their slices.
  MPIACCEL_CHECK_ALL(at::equal(fc_tp->weight, tp::local_slice(fc->weight, 0, *group)));
  MPIACCEL_CHECK_ALL(at::equal(proj_tp->weight, tp::local_slice(proj->weight, 1, *group)));
  MPIACCEL_CHECK_ALL(at::equal(proj_tp->bias, proj->bias));

  const at::Tensor x0 = torch::randn({5, 7, 24});
  at::Tensor x = x0.clone().requires_grad_(true), x_tp = x0.clone().requires_grad_(true);
  const at::Tensor y = proj->forward(at::gelu(fc->forward(x)));
  const at::Tensor y_tp = proj_tp->forward(at::gelu(fc_tp->forward(x_tp)));
  MPIACCEL_CHECK_ALL(distance(y_tp, y) <= kTolerance);
  const at::Tensor upstream = torch::randn(y.sizes());
  y.backward(upstream);
  y_tp.backward(upstream);
  MPIACCEL_CHECK_ALL(distance(x_tp.grad(), x.grad()) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(fc_tp->weight.grad(), tp::local_slice(fc->weight.grad(), 0, *group)) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(fc_tp->bias.grad(), tp::local_slice(fc->bias.grad(), 0, *group)) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(proj_tp->weight.grad(), tp::local_slice(proj->weight.grad(), 1, *group)) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(proj_tp->bias.grad(), proj->bias.grad()) <= kTolerance);
}

BOOST_AUTO_TEST_CASE(gathered_output_and_whole_input) {
  const auto group = world_ptr();
  torch::nn::Linear dense(12, 36);
  auto column = std::make_shared<tp::ColumnParallelLinear>(12, 36, group, true, /*gather_output=*/true);
  column->load_full(dense->weight, dense->bias);
  auto row = std::make_shared<tp::RowParallelLinear>(36, 12, group, false, /*input_is_parallel=*/false);
  torch::nn::Linear dense_row(torch::nn::LinearOptions(36, 12).bias(false));
  row->load_full(dense_row->weight);

  const at::Tensor x0 = torch::randn({4, 12});
  at::Tensor x = x0.clone().requires_grad_(true), x_tp = x0.clone().requires_grad_(true);
  const at::Tensor y = dense_row->forward(dense->forward(x));
  const at::Tensor y_tp = row->forward(column->forward(x_tp));
  MPIACCEL_CHECK_ALL(distance(y_tp, y) <= kTolerance);
  y.sum().backward();
  y_tp.sum().backward();
  MPIACCEL_CHECK_ALL(distance(x_tp.grad(), x.grad()) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(row->weight.grad(), tp::local_slice(dense_row->weight.grad(), 1, *group)) <= kTolerance);
  MPIACCEL_CHECK_ALL(distance(column->weight.grad(), tp::local_slice(dense->weight.grad(), 0, *group)) <= kTolerance);
}

BOOST_AUTO_TEST_CASE(vocabulary_parallel_embedding_and_cross_entropy) {
  const auto group = world_ptr();
  const int64_t vocab = 60, width = 8;
  torch::manual_seed(5);
  torch::nn::Embedding embedding(vocab, width);
  torch::nn::Linear head(torch::nn::LinearOptions(width, vocab).bias(false));
  torch::manual_seed(5);
  auto embedding_tp = std::make_shared<tp::VocabParallelEmbedding>(vocab, width, group);
  MPIACCEL_CHECK_ALL(at::equal(embedding_tp->weight, tp::local_slice(embedding->weight, 0, *group)));
  auto head_tp = std::make_shared<tp::ColumnParallelLinear>(width, vocab, group, false);
  head_tp->load_full(head->weight);

  const at::Tensor tokens = torch::randint(vocab, {3, 10});
  at::Tensor target = torch::randint(vocab, {30});
  target.index_put_({at::indexing::Slice(0, 30, 7)}, -100);  // some ignored
  const at::Tensor loss =
      at::cross_entropy_loss(head->forward(embedding->forward(tokens)).view({30, vocab}), target);
  const at::Tensor loss_tp = tp::vocab_parallel_cross_entropy(
      head_tp->forward(embedding_tp->forward(tokens)).view({30, -1}), target, group);
  MPIACCEL_CHECK_ALL(distance(loss_tp, loss) <= kTolerance);
  loss.backward();
  loss_tp.backward();
  MPIACCEL_CHECK_ALL(distance(embedding_tp->weight.grad(), tp::local_slice(embedding->weight.grad(), 0, *group)) <=
                     kTolerance);
  MPIACCEL_CHECK_ALL(distance(head_tp->weight.grad(), tp::local_slice(head->weight.grad(), 0, *group)) <= kTolerance);
}

BOOST_AUTO_TEST_CASE(a_width_that_does_not_divide_is_one_line) {
  const auto group = world_ptr();
  // One rank divides everything; more refuse a width that is not a multiple.
  MPIACCEL_CHECK_ALL(tp::ColumnParallelLinear(4, 7 * group->size(), group).weight.size(0) == 7);
  if (group->size() == 1) return;
  bool thrown = false;
  try {
    tp::ColumnParallelLinear bad(4, group->size() * 3 + 1, group);
  } catch (const Error& e) {
    thrown = std::string(e.what()).find("does not divide by the " + std::to_string(group->size()) +
                                        " tensor-parallel ranks") != std::string::npos;
  }
  MPIACCEL_CHECK_ALL(thrown);
}
