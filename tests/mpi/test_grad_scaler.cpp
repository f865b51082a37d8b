// ctest: links mpiaccel; np 1 2 3 4; timeout 120
// The GradScaler across ranks: gradients differ per rank (as ZeRO/FSDP shards
// do), one rank injects inf or nan, and every rank must skip the same step and
// keep the same scale; growth after the interval; the state round trip.
// fp16 compute itself cannot run on this CPU (LibTorch 1.13 has no Half
// addmm): test_grad_scaler_gpu.cpp runs it end to end on a GPU.
#define BOOST_TEST_MODULE grad_scaler
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/sgd.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mpiaccel/precision.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

// The rank that misbehaves: rank 1, or rank 0 in a world of one.
int injector() { return world().size() > 1 ? 1 : 0; }

// This rank's shard of a gradient: values scaled by S like a real backward.
at::Tensor shard_grad(double scale, int step) {
  return at::full({5}, (world().rank() + 1) * 0.25 * (step + 1), at::kFloat) * scale;
}

// The scale seen on every rank, to check they agree bit for bit.
bool same_everywhere(double value) {
  std::string bytes(sizeof(double), '\0');
  std::memcpy(bytes.data(), &value, sizeof(double));
  for (const std::string& other : world().all_gather_bytes(bytes))
    if (other != bytes) return false;
  return true;
}

GradScalerOptions short_interval() {
  GradScalerOptions o;
  o.init_scale = 256;
  o.growth_interval = 3;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(injected_inf_or_nan_skips_on_every_rank) {
  GradScaler scaler(short_interval(), world_ptr());
  // A real optimizer over this rank's shard: a skipped step must leave it untouched.
  at::Tensor shard = at::zeros({5}).requires_grad_(true);
  torch::optim::SGD sgd(std::vector<at::Tensor>{shard}, torch::optim::SGDOptions(1.0));
  int stepped = 0;
  const double bad_values[] = {std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN()};
  for (double bad : bad_values) {
    const double before = scaler.scale();
    at::Tensor before_values = shard.detach().clone();
    at::Tensor g = shard_grad(scaler.scale(), 0);
    if (world().rank() == injector()) g[3] = bad;
    shard.mutable_grad() = g;
    scaler.unscale_(optimizer_grads(sgd));
    const bool ran = scaler.step([&] {
      sgd.step();
      ++stepped;
    });
    scaler.update();
    MPIACCEL_CHECK_ALL(!ran);
    MPIACCEL_CHECK_ALL(scaler.scale() == before * 0.5);
    MPIACCEL_CHECK_ALL(scaler.growth_tracker() == 0);
    MPIACCEL_CHECK_ALL(at::equal(shard.detach(), before_values));
    MPIACCEL_CHECK_ALL(same_everywhere(scaler.scale()));
  }
  MPIACCEL_CHECK_ALL(stepped == 0);
  MPIACCEL_CHECK_ALL(scaler.skipped_steps() == 3);
  MPIACCEL_CHECK_ALL(scaler.scale() == 32.0);

  // Finite again: every rank steps with its own unscaled shard gradient.
  at::Tensor g = shard_grad(scaler.scale(), 1);
  shard.mutable_grad() = g;
  scaler.unscale_(optimizer_grads(sgd));
  MPIACCEL_CHECK_ALL(at::allclose(g, at::full({5}, (world().rank() + 1) * 0.5)));
  const bool ran = scaler.step([&] {
    sgd.step();
    ++stepped;
  });
  scaler.update();
  MPIACCEL_CHECK_ALL(ran);
  MPIACCEL_CHECK_ALL(stepped == 1);
  MPIACCEL_CHECK_ALL(at::allclose(shard.detach(), at::full({5}, -(world().rank() + 1) * 0.5)));
}

BOOST_AUTO_TEST_CASE(scale_grows_after_the_interval_and_backs_off) {
  GradScaler scaler(short_interval(), world_ptr());
  std::vector<double> scales;
  // Steps 0..6 finite, step 7 inf on one rank, then finite again.
  for (int step = 0; step < 11; ++step) {
    at::Tensor g = shard_grad(scaler.scale(), step);
    if (step == 7 && world().rank() == injector()) g[0] = std::numeric_limits<double>::infinity();
    scaler.unscale_({g});
    scaler.step([] {});
    scaler.update();
    scales.push_back(scaler.scale());
  }
  // Growth every 3 finite steps (256 → 512 after step 2, 1024 after step 5),
  // halving at step 7, the tracker restarting there: growth after step 10.
  const std::vector<double> expected = {256, 256, 512, 512, 512, 1024, 1024, 512, 512, 512, 1024};
  MPIACCEL_CHECK_ALL(scales == expected);
  MPIACCEL_CHECK_ALL(scaler.skipped_steps() == 1);
  MPIACCEL_CHECK_ALL(same_everywhere(scaler.scale()));
}

BOOST_AUTO_TEST_CASE(state_round_trip_across_ranks) {
  GradScaler scaler(short_interval(), world_ptr());
  for (int step = 0; step < 4; ++step) {
    at::Tensor g = shard_grad(scaler.scale(), step);
    scaler.unscale_({g});
    scaler.step([] {});
    scaler.update();
  }
  // What a checkpoint stores is rank 0's; every rank loads it back.
  const auto state = scaler.state();
  std::string text = state.at("scale") + " " + state.at("growth_tracker");
  text = world().broadcast_bytes(text, 0);
  const size_t space = text.find(' ');
  GradScaler resumed(short_interval(), world_ptr());
  resumed.load_state({{"scale", text.substr(0, space)}, {"growth_tracker", text.substr(space + 1)}});
  MPIACCEL_CHECK_ALL(resumed.scale() == scaler.scale());
  MPIACCEL_CHECK_ALL(resumed.growth_tracker() == scaler.growth_tracker());
  MPIACCEL_CHECK_ALL(resumed.scale() == 512.0 && resumed.growth_tracker() == 1);
  // Both go on identically: two more finite steps grow both.
  for (GradScaler* s : {&scaler, &resumed}) {
    for (int step = 0; step < 2; ++step) {
      at::Tensor g = shard_grad(s->scale(), step);
      s->unscale_({g});
      s->step([] {});
      s->update();
    }
  }
  MPIACCEL_CHECK_ALL(resumed.scale() == 1024.0 && scaler.scale() == 1024.0);
}
