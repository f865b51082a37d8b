// ctest: links mpiaccel; np 1 2 3 4; timeout 120
// state module across ranks: the model check passes on equal models, and the
// broadcast makes every rank's parameters and buffers rank 0's, in one or in
// many chunks, over several dtypes.
#define BOOST_TEST_MODULE state_mpi
#include "support/mpi_test.hpp"

#include <torch/torch.h>

#include "state/model_sync.hpp"

using namespace mpiaccel;
using mpiaccel::test::world;

namespace {

struct Net : torch::nn::Module {
  Net() {
    fc = register_module("fc", torch::nn::Linear(6, 5));
    bn = register_module("bn", torch::nn::BatchNorm1d(5));
    wide = register_module("wide", torch::nn::Linear(5, 300));
    wide->to(torch::kDouble);
  }
  torch::nn::Linear fc{nullptr}, wide{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

std::shared_ptr<Net> seeded(uint64_t seed) {
  torch::manual_seed(seed);
  auto net = std::make_shared<Net>();
  torch::NoGradGuard no_grad;
  torch::nn::init::uniform_(net->bn->running_mean, 0, 1);  // buffers differ per seed too
  return net;
}

bool equal_models(Net& a, Net& b) {
  auto ta = module_tensors(a), tb = module_tensors(b);
  bool same = ta.size() == tb.size();
  for (size_t i = 0; same && i < ta.size(); ++i)
    same = ta[i].name == tb[i].name && torch::equal(ta[i].tensor, tb[i].tensor);
  return same;
}

}  // namespace

BOOST_AUTO_TEST_CASE(same_model_passes_the_check) {
  auto net = seeded(world().rank());
  check_same_model_across_ranks(world(), *net);  // values differ, structure does not
  BOOST_TEST(model_fingerprint(*net).find("parameter\twide.weight\tfloat64\t[300, 5]") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(broadcast_makes_every_rank_rank0s) {
  for (int64_t chunk : {kBroadcastChunkBytes, int64_t{64}}) {  // one chunk per dtype, or many
    auto net = seeded(100 + world().rank());
    broadcast_module_state(world(), *net, chunk);
    auto expected = seeded(100);
    MPIACCEL_CHECK_ALL(equal_models(*net, *expected));
    // Parameters are still leaves that require grad (the copy ran without autograd).
    MPIACCEL_CHECK_ALL(net->fc->weight.requires_grad() && net->fc->weight.is_leaf());
  }
}
