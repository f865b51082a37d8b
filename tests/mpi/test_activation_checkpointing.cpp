// ctest: links mpiaccel; np 1; timeout 300
// Activation checkpointing on the bundled models, one process: the gradients
// are those of the plain backward (GPT and MLP with dropout > 0, so the RNG
// restore is what makes them equal; also under CPU bf16 autocast), the run's
// random sequence is untouched, an interceptor passed as `around` runs
// outside the checkpoint, and the peak CPU memory of forward + backward is
// lower, measured by counting every byte LibTorch allocates; estimate-memory's
// activation term against that measure.
#define BOOST_TEST_MODULE activation_checkpointing
#include "support/mpi_test.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <string>

#include "mpiaccel/activation_checkpointing.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/unit.hpp"
#include "recompute/cpu_memory_meter.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

ModelSpec gpt_spec(double dropout) {
  ModelSpec spec;
  spec.n_layer = 3;
  spec.n_head = 2;
  spec.n_embd = 32;
  spec.block_size = 16;
  spec.dropout = dropout;
  return spec;
}

ModelSpec mlp_spec(double dropout) {
  ModelSpec spec;
  spec.hidden_size = 48;
  spec.mlp_layers = 3;
  spec.dropout = dropout;
  return spec;
}

std::pair<at::Tensor, at::Tensor> batch_for(const std::string& kind, int64_t batch, int64_t time) {
  at::manual_seed(123);
  if (kind == "gpt")
    return {at::randint(0, 256, {batch, time}, at::kLong), at::randint(0, 256, {batch, time}, at::kLong)};
  return {at::randn({batch, 1, 28, 28}), at::randint(0, 10, {batch}, at::kLong)};
}

struct Outcome {
  double loss = 0;
  std::map<std::string, at::Tensor> grads;
  at::Tensor next_random;  ///< a draw after the step: the run's RNG sequence
  int64_t checkpointed = 0;
  int64_t recomputed = 0;
};

// One forward + backward of a fresh model (same init every time), with or
// without checkpointing `unit_class`, optionally under CPU autocast, with
// dropout drawing from seed `dropout_seed`.
Outcome run_once(const std::string& kind, const ModelSpec& spec, const std::string& unit_class,
                 bool checkpointing, at::ScalarType compute = at::kFloat, uint64_t dropout_seed = 7,
                 UnitInterceptor* around = nullptr) {
  at::manual_seed(1);
  std::shared_ptr<Model> model = make_model(kind, spec);
  auto [input, target] = batch_for(kind, 4, spec.block_size);
  ActivationCheckpointing ac({unit_class}, around);
  auto& units = dynamic_cast<HasUnits&>(model->module()).units();
  units.set_interceptor(checkpointing ? static_cast<UnitInterceptor*>(&ac) : around);
  at::manual_seed(dropout_seed);
  at::Tensor loss;
  {
    AutocastGuard autocast("cpu", compute);
    loss = model->loss(model->forward(input), target);
  }
  loss.backward();  // outside autocast, as PyTorch prescribes
  Outcome out;
  out.loss = loss.item<double>();
  for (const auto& item : model->module().named_parameters())
    out.grads[item.key()] = item.value().grad().clone();
  out.next_random = at::rand({8});
  out.checkpointed = ac.checkpointed_runs();
  out.recomputed = ac.recomputations();
  units.set_interceptor(nullptr);
  return out;
}

double max_grad_diff(const Outcome& a, const Outcome& b) {
  double worst = 0;
  for (const auto& [name, g] : a.grads) {
    const at::Tensor& h = b.grads.at(name);
    BOOST_TEST_REQUIRE(h.defined() == g.defined(), name);
    if (!g.defined()) continue;
    worst = std::max(worst, (g.to(at::kDouble) - h.to(at::kDouble)).abs().max().item<double>());
  }
  return worst;
}

void expect_same_gradients(const std::string& kind, const ModelSpec& spec, const std::string& unit_class,
                           at::ScalarType compute, int64_t units) {
  const Outcome plain = run_once(kind, spec, unit_class, false, compute);
  const Outcome ckpt = run_once(kind, spec, unit_class, true, compute);
  const double diff = max_grad_diff(plain, ckpt);
  BOOST_TEST_MESSAGE(kind << " " << precision_dtype_name(compute) << ": loss " << plain.loss
                          << ", max |grad diff| with checkpointing " << diff);
  BOOST_TEST(plain.loss == ckpt.loss);
  // The same kernels on the same values: bit for bit.
  BOOST_TEST(diff == 0.0);
  BOOST_TEST(ckpt.checkpointed == units);
  BOOST_TEST(ckpt.recomputed == units);
  // The recomputation forks the RNG: the run's next draws are unchanged.
  BOOST_TEST(at::equal(plain.next_random, ckpt.next_random));
  // Dropout does act: another seed gives other gradients, so equality above
  // needed the recomputation to replay the forward's masks.
  const Outcome other = run_once(kind, spec, unit_class, true, compute, /*dropout_seed=*/8);
  BOOST_TEST(max_grad_diff(plain, other) > 1e-4);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt_gradients_equal_with_dropout) {
  expect_same_gradients("gpt", gpt_spec(0.2), "DecoderLayer", at::kFloat, 3);
}

BOOST_AUTO_TEST_CASE(mlp_gradients_equal_with_dropout) {
  expect_same_gradients("mlp", mlp_spec(0.2), "MlpBlock", at::kFloat, 3);
}

BOOST_AUTO_TEST_CASE(gpt_gradients_equal_under_bf16_autocast) {
  // backward() runs after the autocast region closed: the recomputation must
  // bring the forward's autocast state back, or it computes in fp32.
  expect_same_gradients("gpt", gpt_spec(0.1), "DecoderLayer", at::kBFloat16, 3);
}

namespace {

// Stands in for FSDP: sees every unit run, and whether the forward it gets
// is checkpointed (the checkpoint must run inside it).
class RecordingInterceptor : public UnitInterceptor {
 public:
  at::Tensor run(torch::nn::Module& unit, const at::Tensor& input, const UnitForward& forward) override {
    ++runs;
    at::Tensor out = forward(input);
    if (out.grad_fn() && out.grad_fn()->name().find("CheckpointFunction") != std::string::npos) ++checkpointed_inside;
    return out;
  }
  int runs = 0;
  int checkpointed_inside = 0;
};

}  // namespace

BOOST_AUTO_TEST_CASE(around_interceptor_runs_outside_the_checkpoint) {
  RecordingInterceptor plain_around, ckpt_around;
  const ModelSpec spec = gpt_spec(0.1);
  const Outcome plain = run_once("gpt", spec, "DecoderLayer", false, at::kFloat, 7, &plain_around);
  const Outcome ckpt = run_once("gpt", spec, "DecoderLayer", true, at::kFloat, 7, &ckpt_around);
  BOOST_TEST(max_grad_diff(plain, ckpt) == 0.0);
  BOOST_TEST(plain_around.runs == 3);
  BOOST_TEST(plain_around.checkpointed_inside == 0);
  // Once per unit in forward, never again in backward (the recomputation
  // calls the unit's own forward: FSDP's parameters are gathered by then).
  BOOST_TEST(ckpt_around.runs == 3);
  BOOST_TEST(ckpt_around.checkpointed_inside == 3);
  BOOST_TEST(ckpt.recomputed == 3);
}

BOOST_AUTO_TEST_CASE(only_selected_units_and_only_with_grad) {
  at::manual_seed(1);
  std::shared_ptr<Model> model = make_model("gpt", gpt_spec(0.0));
  auto& units = dynamic_cast<HasUnits&>(model->module()).units();
  ActivationCheckpointing other({"MlpBlock"});
  units.set_interceptor(&other);
  at::Tensor tokens = at::randint(0, 256, {2, 8}, at::kLong);
  model->forward(tokens).sum().backward();
  BOOST_TEST(other.checkpointed_runs() == 0);
  ActivationCheckpointing ac({"DecoderLayer"});
  units.set_interceptor(&ac);
  {
    at::NoGradGuard no_grad;  // evaluation: nothing to recompute
    model->forward(tokens);
  }
  BOOST_TEST(ac.checkpointed_runs() == 0);
  units.set_interceptor(nullptr);
}

BOOST_AUTO_TEST_CASE(enabled_from_config) {
  at::manual_seed(1);
  std::shared_ptr<Model> gpt = make_model("gpt", gpt_spec(0.0));
  Config config;
  BOOST_TEST(!enable_activation_checkpointing(gpt->module(), config));
  config.fsdp.activation_checkpointing = true;
  RecordingInterceptor fsdp_stand_in;
  auto& units = dynamic_cast<HasUnits&>(gpt->module()).units();
  units.set_interceptor(&fsdp_stand_in);
  {
    std::unique_ptr<ActivationCheckpointing> ac = enable_activation_checkpointing(gpt->module(), config);
    BOOST_TEST_REQUIRE(static_cast<bool>(ac));
    BOOST_TEST(units.interceptor() == ac.get());
    BOOST_TEST(ac->around() == &fsdp_stand_in);
    gpt->forward(at::randint(0, 256, {2, 8}, at::kLong)).sum().backward();
    BOOST_TEST(ac->recomputations() == 3);
    disable_activation_checkpointing(gpt->module(), *ac);
    BOOST_TEST(units.interceptor() == &fsdp_stand_in);
  }
  units.set_interceptor(nullptr);
  // A class the model does not have names the way out.
  config.fsdp.transformer_layer_cls_to_wrap = "DecoderLayer, Block";
  try {
    enable_activation_checkpointing(gpt->module(), config);
    BOOST_FAIL("a missing unit class was accepted");
  } catch (const Error& e) {
    BOOST_TEST(e.message().find("'Block'") != std::string::npos);
  }
  config.fsdp.transformer_layer_cls_to_wrap = "MlpBlock";
  std::shared_ptr<Model> mlp = make_model("mlp", mlp_spec(0.0));
  BOOST_TEST(static_cast<bool>(enable_activation_checkpointing(mlp->module(), config)));
  dynamic_cast<HasUnits&>(mlp->module()).units().set_interceptor(nullptr);
  std::shared_ptr<Model> cnn = make_model("cnn", mlp_spec(0.0));
  BOOST_CHECK_THROW(enable_activation_checkpointing(cnn->module(), config), Error);  // no units
}

namespace {

// Peak bytes allocated above the starting point during one forward+backward
// of the GPT, and the bytes still held when backward begins (what forward
// kept for backward).
struct Peak {
  int64_t peak = 0;
  int64_t kept = 0;
};

Peak measure(bool checkpointing, const ModelSpec& spec, int64_t batch) {
  at::manual_seed(1);
  std::shared_ptr<Model> model = make_model("gpt", spec);
  auto [input, target] = batch_for("gpt", batch, spec.block_size);
  ActivationCheckpointing ac({"DecoderLayer"});
  auto& units = dynamic_cast<HasUnits&>(model->module()).units();
  if (checkpointing) units.set_interceptor(&ac);
  Peak out;
  {
    // The gradients are allocated by the first backward: allocate them
    // before measuring so both runs count activations only.
    model->loss(model->forward(input), target).backward();
    mpiaccel::detail::CpuMemoryMeter meter;
    at::manual_seed(7);
    at::Tensor loss = model->loss(model->forward(input), target);
    out.kept = meter.current();
    loss.backward();
    out.peak = meter.peak();
  }
  units.set_interceptor(nullptr);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(peak_activation_memory_is_lower) {
  ModelSpec spec;
  spec.n_layer = 6;
  spec.n_head = 4;
  spec.n_embd = 64;
  spec.block_size = 64;
  spec.dropout = 0.1;
  const int64_t batch = 8;
  const Peak plain = measure(false, spec, batch);
  const Peak ckpt = measure(true, spec, batch);
  // One layer input [B, T, C] fp32 per checkpointed layer.
  const int64_t layer_input = batch * spec.block_size * spec.n_embd * 4;
  BOOST_TEST_MESSAGE("GPT L=6 C=64 T=64 B=8, dropout 0.1: kept for backward " << plain.kept << " -> "
                     << ckpt.kept << " bytes; peak of forward+backward " << plain.peak << " -> "
                     << ckpt.peak << " bytes (one layer input: " << layer_input << ")");
  BOOST_TEST(plain.kept > 0);
  // Forward keeps each layer's input instead of its activations: the saving
  // is most of the layers' share (the embedding and head still keep theirs).
  BOOST_TEST(ckpt.kept < plain.kept / 2);
  BOOST_TEST(ckpt.peak < plain.peak * 3 / 4);
}

BOOST_AUTO_TEST_CASE(activation_estimate_against_measured) {
  // estimate-memory's activation term (Korthikanti et al.) against the
  // measured peak of forward + backward above the model states, fp32, with
  // dropout: the estimate is what a rank must have free for activations.
  for (int64_t block : {64, 128}) {
    ModelSpec spec;
    spec.n_layer = 4;
    spec.n_head = 4;
    spec.n_embd = 64;
    spec.block_size = block;
    spec.dropout = 0.1;
    const int64_t batch = 4;
    for (bool checkpointing : {false, true}) {
      const Peak measured = measure(checkpointing, spec, batch);
      const int64_t estimated = activation_bytes("gpt", spec, batch, 4, checkpointing);
      const double ratio = double(estimated) / double(measured.peak);
      BOOST_TEST_MESSAGE("GPT L=4 C=64 H=4 T=" << block << " B=4 fp32" << (checkpointing ? " checkpointed" : "")
                         << ": estimated " << estimated << " bytes, measured peak " << measured.peak
                         << " (kept after forward " << measured.kept << "), estimate/peak " << ratio);
      // Measured 0.84-0.88 here: LibTorch's CPU dropout keeps a float mask
      // where the formula counts one byte, and matmul copies q, k and v to
      // contiguous memory. Within a quarter either way is what we promise.
      BOOST_TEST(ratio >= 0.75);
      BOOST_TEST(ratio <= 1.25);
    }
  }
}
