// ctest: links mpiaccel; np 2; timeout 120
// The Accelerator knows a split of the model only as a ModelSplit, handed to
// it by the parallelize step (include/mpiaccel/parallelize.hpp). A mesh that
// splits the model (tp_size 2) without the split is refused at prepare, in
// one line naming the key and what to call; parallelize adds the split, and
// the prepared Accelerator then holds it. A dimension is split once, and no
// split comes after prepare.
#define BOOST_TEST_MODULE model_splits
#include "support/mpi_test.hpp"

#include <torch/optim/adamw.h>

#include <functional>
#include <memory>
#include <string>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/parallelize.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

Config tp_over_the_world() {
  return Config::defaults({"parallelism.tp_size=2", "distributed.strategy=ddp", "logging.level=warn",
                           "model.n_layer=1", "model.n_embd=32", "model.n_head=2",
                           "train.seq_len=16"});
}

std::shared_ptr<Model> small_gpt(const Config& config) {
  return make_model("gpt", ModelSpec::from(config.model, config.train.seq_len));
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(prepare_refuses_a_mesh_split_without_its_split) {
  Accelerator acc(runtime(), tp_over_the_world());
  const auto model = small_gpt(acc.config());
  auto module = as_module(model);
  auto optimizer = std::make_shared<torch::optim::AdamW>(module->parameters());
  const std::string message = error_of([&] { acc.prepare(module, optimizer); });
  MPIACCEL_CHECK_ALL(message.find("[parallelism] tp_size 2, but the model was not split over tp before prepare: "
                                  "split it with parallelize") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(parallelize_hands_the_split_over_once) {
  Accelerator acc(runtime(), tp_over_the_world());
  const auto model = small_gpt(acc.config());
  auto module = as_module(model);
  parallelize(acc, module, bundled_plan(*model, acc.config()), [](torch::nn::Module& kept) {
    return std::make_shared<torch::optim::AdamW>(kept.parameters());
  });
  MPIACCEL_CHECK_ALL(acc.splits().size() == 1 && std::string(acc.splits().front()->dimension()) == "tp");
  MPIACCEL_CHECK_ALL(acc.splits().front()->group().size() == 2);
  MPIACCEL_CHECK_ALL(pipeline_of(acc) == nullptr);
  // After prepare no split can be added: the step already counts through them.
  const std::string late = error_of([&] { acc.add_split(acc.splits().front()); });
  MPIACCEL_CHECK_ALL(late.find("add_split after prepare()") != std::string::npos);
}
