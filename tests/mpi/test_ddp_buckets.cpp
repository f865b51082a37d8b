// ctest: links mpiaccel; np 1 2 3; timeout 120
// DDP bucket layout: size caps (first bucket 1 MiB), reverse parameter order,
// one dtype per bucket, and the rebuild after the first iteration, identical
// on every rank (rank 0's ready order).
#define BOOST_TEST_MODULE ddp_buckets
#include "support/mpi_test.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "grad_sync/bucket_layout.hpp"
#include "ddp/ddp_strategy.hpp"

using namespace mpiaccel;
using mpiaccel::detail::assign_buckets;
using mpiaccel::detail::GradInfo;
using mpiaccel::test::world;
using mpiaccel::test::world_ptr;

namespace {

constexpr int64_t kMiB = 1 << 20;

std::string assignment_bytes(const std::vector<std::vector<size_t>>& buckets) {
  std::string text;
  for (const auto& b : buckets) {
    for (size_t i : b) text += std::to_string(i) + ",";
    text += ";";
  }
  return text;
}

bool same_on_every_rank(const std::string& bytes) {
  bool same = true;
  for (const auto& other : world().all_gather_bytes(bytes)) same = same && other == bytes;
  return same;
}

struct Deep : torch::nn::Module {
  explicit Deep(int layers) {
    for (int i = 0; i < layers; ++i)
      fcs.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(256, 256)));
    extra = register_module("extra", torch::nn::Linear(torch::nn::LinearOptions(256, 4)));
    extra->to(torch::kDouble);
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& fc : fcs) x = torch::tanh(fc->forward(x));
    return extra->forward(x.to(torch::kDouble));
  }
  std::vector<torch::nn::Linear> fcs;
  torch::nn::Linear extra{nullptr};
};

// Registered head first, then two parallel layers whose forward order depends
// on the rank, so ranks see different ready orders.
struct Parallel : torch::nn::Module {
  Parallel() {
    head = register_module("head", torch::nn::Linear(16, 2));
    a = register_module("a", torch::nn::Linear(8, 16));
    b = register_module("b", torch::nn::Linear(8, 16));
  }
  torch::Tensor forward(torch::Tensor x, bool a_first) {
    torch::Tensor h;
    if (a_first) {
      auto ha = a->forward(x);
      h = ha + b->forward(x);
    } else {
      auto hb = b->forward(x);
      h = a->forward(x) + hb;
    }
    return head->forward(torch::tanh(h));
  }
  torch::nn::Linear head{nullptr}, a{nullptr}, b{nullptr};
};

}  // namespace

BOOST_AUTO_TEST_CASE(assign_buckets_by_size_and_dtype) {
  // index: 0..5, given in reverse order as the reducer does at first.
  const c10::Device cpu(c10::kCPU);
  std::vector<GradInfo> grads{{at::kFloat, cpu, 10 * kMiB}, {at::kFloat, cpu, 20 * kMiB},
                              {at::kDouble, cpu, 8},        {at::kFloat, cpu, 100 * 1024},
                              {at::kFloat, cpu, 600 * 1024}, {at::kFloat, cpu, 600 * 1024}};
  const auto buckets = assign_buckets(grads, {5, 4, 3, 2, 1, 0}, kMiB, 25 * kMiB);
  // float: [5] (600 KiB, the next would pass 1 MiB), [4, 3, 1] (<= 25 MiB), [0];
  // double: [2]. Ordered by their first gradient's position.
  const std::vector<std::vector<size_t>> expected{{5}, {4, 3, 1}, {2}, {0}};
  BOOST_TEST(assignment_bytes(buckets) == assignment_bytes(expected));
  // A gradient larger than the cap gets a bucket of its own.
  const auto one_each = assign_buckets(grads, {5, 4, 3, 2, 1, 0}, 1, 1);
  BOOST_TEST(one_each.size() == 6u);
  BOOST_CHECK_THROW(assign_buckets(grads, {0, 1, 2, 3, 4, 4}, kMiB, kMiB), mpiaccel::Error);
}

BOOST_AUTO_TEST_CASE(reducer_layout_and_rebuild) {
  at::set_num_threads(1);
  torch::manual_seed(0);
  auto model = std::make_shared<Deep>(6);  // 6 x 257 KiB float + a double layer
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01));
  DdpConfig config;
  config.bucket_cap_mb = 0.6;  // below the 1 MiB first-bucket cap: the cap wins
  mpiaccel::detail::DdpStrategy ddp(config, world_ptr());
  ddp.prepare(model, opt);
  auto& reducer = ddp.reducer();
  const auto& params = reducer.grad_params();
  const auto initial = reducer.bucket_assignment();
  const auto sizes = reducer.bucket_sizes();

  // Reverse parameter order within each dtype; one dtype per bucket; caps.
  std::vector<size_t> flat;
  bool one_dtype = true, within_cap = true;
  for (size_t b = 0; b < initial.size(); ++b) {
    for (size_t i : initial[b]) {
      flat.push_back(i);
      one_dtype = one_dtype && params[i].scalar_type() == params[initial[b][0]].scalar_type();
    }
    within_cap = within_cap && (sizes[b] <= int64_t(0.6 * kMiB) || initial[b].size() == 1);
  }
  std::vector<size_t> reverse(params.size());
  for (size_t k = 0; k < reverse.size(); ++k) reverse[k] = reverse.size() - 1 - k;
  BOOST_TEST(flat == reverse);
  BOOST_TEST(one_dtype);
  BOOST_TEST(within_cap);
  BOOST_TEST(sizes.front() <= kMiB);
  BOOST_TEST(!reducer.buckets_rebuilt());

  // Default cap: the first bucket is capped at 1 MiB, the rest at 25 MiB.
  auto model2 = std::make_shared<Deep>(6);
  mpiaccel::detail::DdpStrategy ddp2(DdpConfig{}, world_ptr());
  ddp2.prepare(model2, opt);
  const auto sizes2 = ddp2.reducer().bucket_sizes();
  BOOST_TEST(sizes2.front() <= kMiB);
  BOOST_TEST(sizes2.size() == 3u);  // float first (<= 1 MiB), double, float rest

  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    model->forward(torch::randn({8, 256})).sum().backward();
    ddp.after_backward();
  }
  BOOST_TEST(reducer.buckets_rebuilt());
  MPIACCEL_CHECK_ALL(same_on_every_rank(assignment_bytes(reducer.bucket_assignment())));
}

BOOST_AUTO_TEST_CASE(rebuild_uses_rank_zero_order_on_every_rank) {
  at::set_num_threads(1);
  torch::manual_seed(0);
  auto model = std::make_shared<Parallel>();
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.01));
  DdpConfig config;
  config.bucket_cap_mb = 1e-6;  // one bucket per parameter: the layout IS the order
  mpiaccel::detail::DdpStrategy ddp(config, world_ptr());
  ddp.prepare(model, opt);
  auto& reducer = ddp.reducer();
  const bool a_first = world().rank() % 2 == 0;
  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    model->forward(torch::randn({4, 8}), a_first).sum().backward();
    ddp.after_backward();
  }
  const auto observed = reducer.observed_order();
  std::string rank0_order;
  for (size_t i : observed) rank0_order += std::to_string(i) + ",;";
  rank0_order = world().broadcast_bytes(rank0_order, 0);
  const std::string mine = assignment_bytes(reducer.bucket_assignment());
  BOOST_TEST_MESSAGE("rank " << world().rank() << " observed "
                             << assignment_bytes({observed}) << " buckets " << mine);
  MPIACCEL_CHECK_ALL(mine == rank0_order);
  // The head (registered first, used last) is ready first: it leads after the rebuild.
  const auto buckets = reducer.bucket_assignment();
  MPIACCEL_CHECK_ALL(buckets[0][0] <= 1 && buckets[1][0] <= 1);
}
