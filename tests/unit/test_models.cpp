// ctest: links mpiaccel; timeout 300
#define BOOST_TEST_MODULE models
#include <ATen/core/grad_mode.h>
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/unit.hpp"

using mpiaccel::Model;
using mpiaccel::ModelSpec;

namespace {

ModelSpec small_gpt() {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 2;
  spec.n_embd = 32;
  spec.block_size = 16;
  return spec;
}

std::vector<std::string> parameter_names(Model& model) {
  std::vector<std::string> names;
  for (const auto& item : model.module().named_parameters()) names.push_back(item.key());
  return names;
}

// Counts the units a forward runs, and checks they are what FSDP would wrap.
class CountingInterceptor : public mpiaccel::UnitInterceptor {
 public:
  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input,
                 const mpiaccel::UnitForward& forward) override {
    ++calls;
    names.push_back(unit.name());
    return forward(input);
  }
  int calls = 0;
  std::vector<std::string> names;
};

at::Tensor random_tokens(int64_t batch, int64_t time) {
  return at::randint(256, {batch, time}, at::kLong);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt_shapes_and_parameter_names) {
  at::manual_seed(0);
  auto model = mpiaccel::make_model("gpt", small_gpt());
  BOOST_TEST(model->kind() == "gpt");
  at::Tensor logits = model->forward(random_tokens(3, 16));
  BOOST_TEST(logits.sizes() == at::IntArrayRef({3, 16, 256}));
  BOOST_TEST(model->forward(random_tokens(1, 5)).sizes() == at::IntArrayRef({1, 5, 256}));
  BOOST_CHECK_THROW(model->forward(random_tokens(1, 17)), mpiaccel::Error);

  const std::vector<std::string> expected = {
      "wte.weight",
      "wpe.weight",
      "blocks.0.ln_1.weight",
      "blocks.0.ln_1.bias",
      "blocks.0.attn.qkv.weight",
      "blocks.0.attn.qkv.bias",
      "blocks.0.attn.proj.weight",
      "blocks.0.attn.proj.bias",
      "blocks.0.ln_2.weight",
      "blocks.0.ln_2.bias",
      "blocks.0.mlp.fc.weight",
      "blocks.0.mlp.fc.bias",
      "blocks.0.mlp.proj.weight",
      "blocks.0.mlp.proj.bias",
  };
  const std::vector<std::string> names = parameter_names(*model);
  BOOST_REQUIRE(names.size() == 2 + 2 * 12 + 2u);
  for (size_t i = 0; i < expected.size(); ++i) BOOST_TEST(names[i] == expected[i]);
  BOOST_TEST(names[14] == "blocks.1.ln_1.weight");
  BOOST_TEST(names.back() == "ln_f.bias");
  // The model owns no buffers: nothing for DDP to broadcast or a checkpoint to store.
  BOOST_TEST(model->module().buffers().empty());

  // The units FSDP's TRANSFORMER_BASED_WRAP looks for, by class name.
  int decoder_layers = 0;
  for (const auto& item : model->module().named_modules()) {
    if (item.value()->name() == "DecoderLayer") {
      ++decoder_layers;
      BOOST_TEST(item.key().rfind("blocks.", 0) == 0u);
    }
  }
  BOOST_TEST(decoder_layers == 2);
}

BOOST_AUTO_TEST_CASE(gpt_head_is_tied_to_the_token_embedding) {
  at::manual_seed(1);
  ModelSpec spec;  // the default job size: 4 layers, 128 wide
  spec.n_layer = 4;
  spec.n_embd = 128;
  spec.block_size = 128;
  auto model = mpiaccel::make_model("gpt", spec);
  const int64_t c = 128, v = 256, t = 128, l = 4;
  const int64_t per_layer =
      2 * 2 * c + (c * 3 * c + 3 * c) + (c * c + c) + (c * 4 * c + 4 * c) + (4 * c * c + c);
  const int64_t expected = v * c + t * c + l * per_layer + 2 * c;  // no separate head matrix
  BOOST_TEST(mpiaccel::parameter_count(*model) == expected);
  BOOST_TEST_MESSAGE("GPT n_layer 4, n_embd 128: " << mpiaccel::parameter_count(*model)
                                                   << " parameters");
  int wte_like = 0;
  for (const at::Tensor& p : model->module().parameters()) {
    if (p.sizes() == at::IntArrayRef({v, c})) ++wte_like;
  }
  BOOST_TEST(wte_like == 1);

  // Changing the embedding changes the head: the logits move with it.
  at::Tensor tokens = random_tokens(1, 8);
  at::Tensor before = model->forward(tokens);
  {
    at::NoGradGuard no_grad;
    model->module().named_parameters()["wte.weight"].mul_(2.0);
  }
  BOOST_TEST(!model->forward(tokens).allclose(before));

  // A gradient reaches wte from both ends.
  at::Tensor loss = model->loss(model->forward(tokens), random_tokens(1, 8));
  loss.backward();
  BOOST_TEST(model->module().named_parameters()["wte.weight"].grad().defined());
}

BOOST_AUTO_TEST_CASE(gpt_initialisation_is_seeded_and_nanogpt_like) {
  at::manual_seed(7);
  auto a = mpiaccel::make_model("gpt", small_gpt());
  at::manual_seed(7);
  auto b = mpiaccel::make_model("gpt", small_gpt());
  auto pa = a->module().named_parameters();
  auto pb = b->module().named_parameters();
  for (const auto& item : pa) BOOST_TEST(item.value().equal(pb[item.key()]), item.key());

  BOOST_TEST(pa["blocks.0.attn.qkv.bias"].abs().max().item<double>() == 0.0);
  BOOST_TEST(pa["blocks.0.ln_1.weight"].min().item<double>() == 1.0);
  // 0.02, and 0.02 / sqrt(2 * n_layer) = 0.01 for the residual projections.
  BOOST_TEST(pa["blocks.0.mlp.fc.weight"].std().item<double>() == 0.02,
             boost::test_tools::tolerance(0.05));
  BOOST_TEST(pa["blocks.1.mlp.proj.weight"].std().item<double>() == 0.01,
             boost::test_tools::tolerance(0.05));
}

BOOST_AUTO_TEST_CASE(gpt_loss_starts_at_uniform_and_falls_with_adam) {
  at::manual_seed(3);
  auto model = mpiaccel::make_model("gpt", small_gpt());
  at::Tensor input = random_tokens(4, 16);
  at::Tensor target = random_tokens(4, 16);
  const double initial = model->loss(model->forward(input), target).item<double>();
  BOOST_TEST(initial == std::log(256.0), boost::test_tools::tolerance(0.02));

  torch::optim::Adam adam(model->module().parameters(), torch::optim::AdamOptions(3e-3));
  double last = initial;
  for (int step = 0; step < 20; ++step) {
    adam.zero_grad();
    at::Tensor loss = model->loss(model->forward(input), target);
    loss.backward();
    adam.step();
    last = loss.item<double>();
  }
  BOOST_TEST_MESSAGE("GPT loss on one batch: " << initial << " -> " << last);
  BOOST_TEST(last < initial - 0.5);
}

BOOST_AUTO_TEST_CASE(gpt_runs_each_decoder_layer_through_its_units) {
  at::manual_seed(4);
  ModelSpec spec = small_gpt();
  spec.n_layer = 3;
  auto model = mpiaccel::make_model("gpt", spec);
  auto* units = dynamic_cast<mpiaccel::HasUnits*>(&model->module());
  BOOST_REQUIRE(units != nullptr);
  CountingInterceptor counter;
  units->units().set_interceptor(&counter);
  at::Tensor tokens = random_tokens(2, 8);
  at::Tensor with = model->forward(tokens);
  BOOST_TEST(counter.calls == 3);
  BOOST_TEST((counter.names == std::vector<std::string>(3, "DecoderLayer")));
  model->forward(tokens);
  BOOST_TEST(counter.calls == 6);
  units->units().set_interceptor(nullptr);
  BOOST_TEST(model->forward(tokens).equal(with));
  BOOST_TEST(counter.calls == 6);
}

BOOST_AUTO_TEST_CASE(generate_is_seeded_and_restores_the_mode) {
  at::manual_seed(5);
  auto model = mpiaccel::make_model("gpt", small_gpt());
  const std::string prompt = "The quick brown fox jumps over the lazy dog";  // > block_size
  mpiaccel::GenerateOptions options;
  options.n_tokens = 40;
  options.seed = 11;
  at::manual_seed(100);
  const std::string a = mpiaccel::generate(*model, prompt, options);
  const at::Tensor after_a = at::rand({4});
  at::manual_seed(100);
  const std::string b = mpiaccel::generate(*model, prompt, options);
  BOOST_TEST(a.size() == 40u);
  BOOST_TEST(a == b);
  // Sampling uses its own generator: torch's global one is untouched.
  BOOST_TEST(at::rand({4}).equal(after_a));
  options.seed = 12;
  BOOST_TEST(mpiaccel::generate(*model, prompt, options) != a);

  options.temperature = 0;  // greedy
  const std::string greedy = mpiaccel::generate(*model, "", options);
  options.seed = 99;
  BOOST_TEST(mpiaccel::generate(*model, "", options) == greedy);
  BOOST_TEST(model->module().is_training());
  options.n_tokens = 0;
  BOOST_TEST(mpiaccel::generate(*model, prompt, options).empty());

  auto mlp = mpiaccel::make_model("mlp", ModelSpec{});
  BOOST_CHECK_THROW(mpiaccel::generate(*mlp, prompt, options), mpiaccel::Error);
}

BOOST_AUTO_TEST_CASE(mlp_shapes_names_and_units) {
  at::manual_seed(6);
  ModelSpec spec;
  spec.hidden_size = 64;
  spec.mlp_layers = 3;
  auto model = mpiaccel::make_model("mlp", spec);
  BOOST_TEST(model->kind() == "mlp");
  CountingInterceptor counter;
  dynamic_cast<mpiaccel::HasUnits&>(model->module()).units().set_interceptor(&counter);
  at::Tensor logits = model->forward(at::randn({5, 1, 28, 28}));
  BOOST_TEST(logits.sizes() == at::IntArrayRef({5, 10}));
  BOOST_TEST(counter.calls == 3);
  BOOST_TEST(counter.names[0] == "MlpBlock");
  BOOST_TEST(
      (parameter_names(*model) == std::vector<std::string>{"blocks.0.fc.weight", "blocks.0.fc.bias",
                                                           "blocks.1.fc.weight", "blocks.1.fc.bias",
                                                           "blocks.2.fc.weight", "blocks.2.fc.bias",
                                                           "head.weight", "head.bias"}));
  BOOST_TEST(mpiaccel::parameter_count(*model) ==
             784 * 64 + 64 + 2 * (64 * 64 + 64) + 64 * 10 + 10);
  at::Tensor labels = at::randint(10, {5}, at::kLong);
  BOOST_TEST(model->loss(logits, labels).item<double>() == std::log(10.0),
             boost::test_tools::tolerance(0.3));
  BOOST_CHECK_THROW(model->forward(at::randn({5, 784})), mpiaccel::Error);
}

BOOST_AUTO_TEST_CASE(cnn_shapes_and_learning) {
  at::manual_seed(8);
  ModelSpec spec;
  spec.hidden_size = 32;
  auto model = mpiaccel::make_model("cnn", spec);
  BOOST_TEST(model->kind() == "cnn");
  BOOST_TEST((parameter_names(*model) ==
              std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                       "fc.weight", "fc.bias", "head.weight", "head.bias"}));
  // Two classes the network must tell apart: bright top half vs bright bottom half.
  at::Tensor images = at::randn({32, 1, 28, 28}) * 0.3;
  at::Tensor labels = at::arange(32, at::kLong).remainder(2);
  for (int64_t i = 0; i < 32; ++i) {
    const int64_t top = labels[i].item<int64_t>() == 0 ? 0 : 14;
    images[i].slice(1, top, top + 14).add_(1.0);
  }
  at::Tensor logits = model->forward(images);
  BOOST_TEST(logits.sizes() == at::IntArrayRef({32, 10}));
  torch::optim::Adam adam(model->module().parameters(), torch::optim::AdamOptions(1e-3));
  for (int step = 0; step < 15; ++step) {
    adam.zero_grad();
    at::Tensor loss = model->loss(model->forward(images), labels);
    loss.backward();
    adam.step();
  }
  const double accuracy =
      model->forward(images).argmax(1).eq(labels).to(at::kFloat).mean().item<double>();
  BOOST_TEST(accuracy == 1.0);
}

BOOST_AUTO_TEST_CASE(module_and_model_views_share_the_object) {
  std::shared_ptr<Model> model = mpiaccel::make_model("cnn", ModelSpec{});
  std::shared_ptr<torch::nn::Module> module = mpiaccel::as_module(model);
  BOOST_TEST(module.get() == &model->module());
  BOOST_TEST(model.use_count() == 2);
  BOOST_TEST(mpiaccel::as_model(module) == model);
  BOOST_TEST(mpiaccel::as_model(std::make_shared<torch::nn::Module>()) == nullptr);
  // shared_from_this works: the module knows its owner.
  BOOST_TEST(module->modules().size() == 6u);  // itself, conv1, conv2, fc, dropout, head
}

BOOST_AUTO_TEST_CASE(bad_sizes_are_errors) {
  ModelSpec spec = small_gpt();
  spec.n_head = 3;  // 32 is not a multiple of 3
  BOOST_CHECK_THROW(mpiaccel::make_model("gpt", spec), mpiaccel::Error);
  BOOST_CHECK_THROW(mpiaccel::make_model("resnet", ModelSpec{}), mpiaccel::Error);
  spec = ModelSpec{};
  spec.mlp_layers = 0;
  BOOST_CHECK_THROW(mpiaccel::make_model("mlp", spec), mpiaccel::Error);
}
