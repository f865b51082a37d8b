// ctest: links mpiaccel; np 1; timeout 300; labels gpu
// fp16 end to end on a GPU (CPU LibTorch has no fp16 matmul): the bundled GPT
// trains a few steps under CUDA fp16 autocast with the GradScaler, and the
// loss falls. Runs only where CUDA is (label gpu, excluded by `make test`);
// without a GPU it fails, it never skips.
#define BOOST_TEST_MODULE grad_scaler_gpu
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <cmath>

#include "mpiaccel/models.hpp"
#include "mpiaccel/precision.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

BOOST_AUTO_TEST_CASE(gpt_fp16_autocast_with_scaler_trains) {
  BOOST_TEST_REQUIRE(at::hasCUDA(), "this test needs a CUDA device and a CUDA build of LibTorch");
  const at::Device device(at::kCUDA, 0);
  at::manual_seed(1);
  ModelSpec spec;
  spec.n_layer = 2;
  spec.n_head = 4;
  spec.n_embd = 64;
  spec.block_size = 32;
  std::shared_ptr<Model> model = make_model("gpt", spec);
  model->module().to(device);
  torch::optim::AdamW optimizer(model->module().parameters(), torch::optim::AdamWOptions(3e-3));
  GradScaler scaler({}, world_ptr(), "cuda:0");

  at::Tensor tokens = at::randint(0, 256, {8, spec.block_size + 1}, at::TensorOptions(at::kLong).device(device));
  at::Tensor input = tokens.narrow(1, 0, spec.block_size);
  at::Tensor target = tokens.narrow(1, 1, spec.block_size);
  double first = 0, last = 0;
  int stepped = 0;
  const int steps = 30;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    at::Tensor loss;
    {
      AutocastGuard autocast("cuda:0", at::kHalf);
      at::Tensor logits = model->forward(input);
      BOOST_TEST_REQUIRE((logits.scalar_type() == at::kHalf), "autocast did not compute in fp16");
      loss = model->loss(logits, target);
    }
    scaler.scale(loss).backward();
    scaler.unscale_(optimizer_grads(optimizer));
    if (scaler.step([&] { optimizer.step(); })) ++stepped;
    scaler.update();
    const double value = loss.item<double>();
    BOOST_TEST_REQUIRE(std::isfinite(value));
    if (step == 0) first = value;
    last = value;
  }
  BOOST_TEST_MESSAGE("fp16 GPT: loss " << first << " -> " << last << ", " << stepped << "/" << steps
                                       << " steps taken, final scale " << scaler.scale());
  // The first steps at 65536 may overflow and back off; most must step.
  BOOST_TEST(stepped >= steps - 10);
  BOOST_TEST(last < first * 0.8);
  for (const at::Tensor& p : model->module().parameters())
    BOOST_TEST((p.scalar_type() == at::kFloat));  // master weights stay fp32
}
