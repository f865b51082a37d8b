// ctest: links mpiaccel; timeout 300
// The bundled Llama: transformers' names and shapes, its LlamaDecoderLayer
// units, causality, the KV cache (for the GPT too), Llama 3.1's rotary
// frequencies in closed form, deferred builds and the size checks.
// tests/scripts/test_hf_llama.sh compares its numbers with transformers'.
#define BOOST_TEST_MODULE llama
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/causal_lm.hpp"
#include "models/families/llama/rope.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/unit.hpp"

using mpiaccel::Model;
using mpiaccel::ModelSpec;

namespace {

ModelSpec small_llama() {
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_kv_head = 2;
  spec.n_embd = 32;
  spec.intermediate_size = 48;
  spec.vocab_size = 64;
  spec.block_size = 16;
  return spec;
}

std::map<std::string, std::vector<int64_t>> shapes(Model& model) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& item : model.module().named_parameters()) out[item.key()] = item.value().sizes().vec();
  return out;
}

class CountingInterceptor : public mpiaccel::UnitInterceptor {
 public:
  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input, const mpiaccel::UnitForward& forward) override {
    names.push_back(unit.name());
    return forward(input);
  }
  std::vector<std::string> names;
};

}  // namespace

BOOST_AUTO_TEST_CASE(parameters_carry_transformers_names_and_shapes) {
  at::manual_seed(0);
  auto model = mpiaccel::make_model("llama", small_llama());
  const auto s = shapes(*model);
  const std::map<std::string, std::vector<int64_t>> layer = {
      {"self_attn.q_proj.weight", {32, 32}}, {"self_attn.k_proj.weight", {16, 32}},
      {"self_attn.v_proj.weight", {16, 32}}, {"self_attn.o_proj.weight", {32, 32}},
      {"mlp.gate_proj.weight", {48, 32}},    {"mlp.up_proj.weight", {48, 32}},
      {"mlp.down_proj.weight", {32, 48}},    {"input_layernorm.weight", {32}},
      {"post_attention_layernorm.weight", {32}}};
  for (int l = 0; l < 2; ++l)
    for (const auto& [name, shape] : layer) {
      const std::string full = "model.layers." + std::to_string(l) + "." + name;
      BOOST_TEST_REQUIRE(s.count(full), full);
      BOOST_TEST((s.at(full) == shape), full);
    }
  BOOST_TEST((s.at("model.embed_tokens.weight") == std::vector<int64_t>{64, 32}));
  BOOST_TEST((s.at("model.norm.weight") == std::vector<int64_t>{32}));
  BOOST_TEST((s.at("lm_head.weight") == std::vector<int64_t>{64, 32}));
  BOOST_TEST(s.size() == 2 * layer.size() + 3);
  BOOST_TEST(model->kind() == "llama");
  BOOST_TEST(model->module().name() == "LlamaForCausalLM");

  ModelSpec tied = small_llama();
  tied.tie_word_embeddings = true;
  tied.attention_bias = true;
  auto tied_model = mpiaccel::make_model("llama", tied);
  const auto t = shapes(*tied_model);
  BOOST_TEST(!t.count("lm_head.weight"));
  BOOST_TEST((t.at("model.layers.1.self_attn.k_proj.bias") == std::vector<int64_t>{16}));
  BOOST_TEST(mpiaccel::parameter_count(*tied_model) == mpiaccel::parameter_count(*model) - 64 * 32 + 2 * (32 + 16 + 16 + 32));
}

BOOST_AUTO_TEST_CASE(swiglu_width_follows_metas_rule_by_default) {
  ModelSpec spec;
  spec.n_embd = 4096;
  BOOST_TEST(spec.swiglu_width() == 11008);  // Llama 2 7B's intermediate_size
  spec.n_embd = 128;
  BOOST_TEST(spec.swiglu_width() == 512);
  spec.intermediate_size = 100;
  BOOST_TEST(spec.swiglu_width() == 100);
}

BOOST_AUTO_TEST_CASE(each_decoder_layer_runs_through_the_units_and_the_model_is_causal) {
  at::manual_seed(1);
  auto model = mpiaccel::make_model("llama", small_llama());
  auto* units = dynamic_cast<mpiaccel::HasUnits*>(&model->module());
  BOOST_TEST_REQUIRE(units != nullptr);
  CountingInterceptor counting;
  units->units().set_interceptor(&counting);
  at::NoGradGuard no_grad;
  at::Tensor tokens = at::randint(64, {2, 10}, at::kLong);
  const at::Tensor logits = model->forward(tokens);
  units->units().set_interceptor(nullptr);
  BOOST_TEST((logits.sizes().vec() == std::vector<int64_t>{2, 10, 64}));
  BOOST_TEST((counting.names == std::vector<std::string>{"LlamaDecoderLayer", "LlamaDecoderLayer"}));
  BOOST_TEST((mpiaccel::model_unit_classes("llama") == std::vector<std::string>{"LlamaDecoderLayer"}));
  // A later token changes nothing before it.
  tokens.select(1, 9).fill_(3);
  const at::Tensor changed = model->forward(tokens);
  BOOST_TEST(at::equal(changed.narrow(1, 0, 9), logits.narrow(1, 0, 9)));
  BOOST_TEST(!at::equal(changed.narrow(1, 9, 1), logits.narrow(1, 9, 1)));
}

BOOST_AUTO_TEST_CASE(the_kv_cache_gives_the_full_forwards_logits) {
  for (const std::string kind : {"llama", "gpt"}) {
    at::manual_seed(2);
    ModelSpec spec = small_llama();
    spec.n_kv_head = kind == "gpt" ? 0 : 2;
    auto model = mpiaccel::make_model(kind, spec);
    model->module().eval();
    auto* lm = dynamic_cast<mpiaccel::detail::CausalLm*>(model.get());
    BOOST_TEST_REQUIRE(lm != nullptr, kind);
    at::NoGradGuard no_grad;
    const at::Tensor tokens = at::randint(64, {1, 12}, at::kLong);
    const at::Tensor full = model->forward(tokens);
    mpiaccel::detail::KvCache cache(static_cast<size_t>(lm->layer_count()));
    at::Tensor step = lm->forward_cached(tokens.narrow(1, 0, 9), cache);
    BOOST_TEST(at::allclose(step, full.narrow(1, 0, 9), 1e-5, 1e-5), kind);
    for (int64_t t = 9; t < 12; ++t) {
      step = lm->forward_cached(tokens.narrow(1, t, 1), cache);
      BOOST_TEST(cache.length() == t + 1, kind);
      BOOST_TEST(at::allclose(step.select(1, 0), full.select(1, t), 1e-5, 1e-5), kind << " position " << t);
    }
    // The context is block_size long: more is refused, by name.
    BOOST_CHECK_THROW(lm->forward_cached(at::zeros({1, 5}, at::kLong), cache), mpiaccel::Error);
  }
}

BOOST_AUTO_TEST_CASE(llama3_rotary_frequencies_match_the_closed_form) {
  ModelSpec spec = small_llama();
  spec.n_head = 2;  // head width 16: eight frequencies
  spec.n_kv_head = 0;
  spec.rope_theta = 500000;
  const at::Tensor plain = mpiaccel::detail::RotaryEmbedding(spec).inverse_frequencies();
  spec.rope_scaling = mpiaccel::RopeScaling::Llama3;
  spec.rope_original_max_positions = 64;  // wavelengths above 64 slowed, below 16 kept
  const at::Tensor scaled = mpiaccel::detail::RotaryEmbedding(spec).inverse_frequencies();
  BOOST_TEST_REQUIRE(plain.numel() == 8);
  int kept = 0, slowed = 0, blended = 0;
  for (int64_t i = 0; i < 8; ++i) {
    const double f = std::pow(500000.0, -2.0 * double(i) / 16.0);
    BOOST_TEST(std::abs(plain[i].item<double>() - f) <= 1e-6 * f);
    const double wavelen = 2 * M_PI / f;
    double expected = f;
    if (wavelen > 64) {
      expected = f / 8;
      ++slowed;
    } else if (wavelen >= 16) {
      const double smooth = (64 / wavelen - 1) / (4 - 1);
      expected = (1 - smooth) * f / 8 + smooth * f;
      ++blended;
    } else {
      ++kept;
    }
    BOOST_TEST(std::abs(scaled[i].item<double>() - expected) <= 1e-6 * expected, "frequency " << i);
  }
  BOOST_TEST((kept > 0 && slowed > 0 && blended > 0));
}

BOOST_AUTO_TEST_CASE(a_deferred_build_has_every_parameter_without_memory) {
  mpiaccel::ModelInit init;
  init.deferred = true;
  auto deferred = mpiaccel::make_model("llama", small_llama(), init);
  auto full = mpiaccel::make_model("llama", small_llama());
  BOOST_TEST((shapes(*deferred) == shapes(*full)));
  BOOST_TEST(mpiaccel::has_deferred_parameters(deferred->module()));
  BOOST_TEST(!mpiaccel::has_deferred_parameters(full->module()));
}

BOOST_AUTO_TEST_CASE(bad_sizes_are_refused_by_name) {
  auto refuses = [](ModelSpec spec, const std::string& says) {
    try {
      mpiaccel::make_model("llama", spec);
      BOOST_ERROR("accepted: " + says);
    } catch (const mpiaccel::Error& e) {
      BOOST_TEST(e.message().find(says) != std::string::npos, e.message());
    }
  };
  ModelSpec spec = small_llama();
  spec.n_kv_head = 3;
  refuses(spec, "n_head 4 is not a multiple of n_kv_head 3");
  spec = small_llama();
  spec.n_embd = 30;
  refuses(spec, "n_embd 30 is not a multiple of n_head 4");
  spec = small_llama();
  spec.head_dim = 5;
  refuses(spec, "head width 5 is odd");
  // An unknown rope_scaling cannot reach the model: the config refuses its text.
  BOOST_CHECK_THROW(mpiaccel::Config::defaults({"model.rope_scaling=yarn"}), mpiaccel::ConfigError);
}
