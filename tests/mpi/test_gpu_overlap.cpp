// ctest: links mpiaccel; np 1; timeout 300; labels gpu
// On a GPU, over NCCL: DDP's first bucket all-reduce runs on the NCCL stream
// while backward is still computing on the compute stream. The bucket's start
// is a device time (a timing event on the NCCL stream, on the host clock);
// the end of backward on the device is when the gradient of the first layer
// (the last one backward computes) was finished, taken by a tensor hook that
// waits for its own stream. Needs a GPU and a CUDA LibTorch: without them it
// fails, it never skips (label gpu: `make test` leaves it out; a GPU machine
// runs `ctest -L gpu`).
#define BOOST_TEST_MODULE gpu_overlap
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <chrono>

#include "ddp/ddp_strategy.hpp"
#include "runtime/device_streams.hpp"
#include "support/small_models.hpp"

using namespace mpiaccel;
using namespace mpiaccel::test;
using Clock = std::chrono::steady_clock;

BOOST_AUTO_TEST_CASE(first_bucket_all_reduce_starts_before_backward_ends_on_the_device) {
  BOOST_TEST_REQUIRE(at::hasCUDA(), "this test needs a CUDA device and a CUDA build of LibTorch");
  auto comm = make_world(runtime(), Backend::Nccl, std::chrono::seconds(120));
  BOOST_TEST_REQUIRE((comm->backend() == Backend::Nccl));
  const at::Device cuda(runtime().device().device);

  // Deep and wide enough that backward takes milliseconds on an H200 after
  // the last layers' gradients (the first bucket, 1 MiB) are ready.
  torch::manual_seed(3);
  auto model = std::make_shared<Mlp>(2048, 2048, 2048, 24);
  model->to(cuda);
  auto opt = std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(1e-3));
  DdpConfig config;
  config.bucket_cap_mb = 4;
  mpiaccel::detail::DdpStrategy strategy(config, comm);
  strategy.prepare(model, opt);

  // The first layer's weight gets its gradient last: its hook marks when
  // the device finished backward's compute.
  Clock::time_point backward_done_on_device{};
  model->fcs.front()->weight.register_hook([&](const at::Tensor& grad) {
    mpiaccel::detail::StreamEvent::record_current(grad.device()).wait_host(std::chrono::seconds(60), "backward");
    backward_done_on_device = Clock::now();
  });

  bool overlapped = true;
  for (int step = 0; step < 4; ++step) {
    torch::manual_seed(50 + step);
    auto x = torch::randn({512, 2048}).to(cuda);
    strategy.zero_grad(*opt);
    model->forward(x).pow(2).mean().backward();
    strategy.after_backward();
    mpiaccel::detail::StreamEvent::record_current(cuda).wait_host(std::chrono::seconds(60), "the step");
    const auto timings = strategy.reducer().last_bucket_timings();
    const auto ms = [&](Clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - timings.front().launched).count();
    };
    BOOST_TEST_MESSAGE("step " << step << ": " << timings.size() << " buckets; first bucket "
                               << "started " << ms(timings.front().started) << " ms and finished "
                               << ms(timings.front().finished)
                               << " ms after its launch; backward done on the device at "
                               << ms(backward_done_on_device) << " ms");
    if (step > 0)  // after the bucket rebuild too
      overlapped = overlapped && timings.size() > 1 &&
                   timings.front().started.time_since_epoch().count() != 0 &&
                   timings.front().started < backward_done_on_device;
    opt->step();
  }
  MPIACCEL_CHECK_ALL(overlapped);
}
