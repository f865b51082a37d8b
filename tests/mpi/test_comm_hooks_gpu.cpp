// ctest: links mpiaccel; np 1; timeout 120; labels gpu
// The GPU paths of issue 29's features, against the same code on the CPU:
// PowerSGD over NCCL on CUDA gradients (its products, Gram-Schmidt and error
// feedback on the device) gives the CPU hook's result over MPI within float
// rounding, over three steps; qwZ's int8 blocks quantized and dequantized on
// the device equal the host's. Needs a GPU and a CUDA LibTorch; it fails
// (never skips) without them (label gpu, excluded by `make test`).
#define BOOST_TEST_MODULE comm_hooks_gpu
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <string>
#include <vector>

#include "comm_hooks/powersgd_hook.hpp"
#include "fsdp/quantized_gather.hpp"
#include "mpiaccel/comm_hook.hpp"

using namespace mpiaccel;
using mpiaccel::test::world;

namespace {

int cuda_index() {
  BOOST_TEST_REQUIRE(at::hasCUDA(), "this test needs a CUDA device and a CUDA build of LibTorch");
  const int index = mpiaccel::test::runtime().device().cuda_index;
  BOOST_TEST_REQUIRE(index >= 0, "this test needs a CUDA device per rank");
  return index;
}

// Three steps of PowerSGD (rank 4, from step 0) over one bucket of a
// [64, 48] matrix and a bias, on `device` through `comm`.
std::vector<at::Tensor> powersgd_steps(Communicator& comm, const at::Device& device) {
  const std::vector<at::Tensor> params = {at::zeros({64, 48}, at::TensorOptions().device(device)),
                                          at::zeros({48}, at::TensorOptions().device(device))};
  PowerSgdOptions options;
  options.rank = 4;
  options.start_iter = 0;
  mpiaccel::detail::PowerSgdHook hook(options);
  hook.attach(params, {"w", "b"}, comm);
  std::vector<at::Tensor> results;
  for (int step = 0; step < 3; ++step) {
    at::manual_seed(10 + step);
    GradBucket bucket;
    bucket.buffer = at::randn({64 * 48 + 48}).to(device);
    bucket.gradients = {bucket.buffer.narrow(0, 0, 64 * 48).view({64, 48}), bucket.buffer.narrow(0, 64 * 48, 48)};
    bucket.params = {0, 1};
    bucket.last = true;
    bucket.comm = &comm;
    HookWork work = hook.launch(bucket);
    if (work.work) work.work->wait();
    if (work.finish) work.finish();
    results.push_back(bucket.buffer.cpu());
  }
  return results;
}

}  // namespace

BOOST_AUTO_TEST_CASE(powersgd_on_the_gpu_equals_the_cpu) {
  const int index = cuda_index();
  auto nccl = make_nccl(world(), index, std::chrono::seconds(60));
  const auto gpu = powersgd_steps(*nccl, at::Device(at::kCUDA, index));
  const auto cpu = powersgd_steps(world(), at::Device(at::kCPU));
  for (size_t s = 0; s < cpu.size(); ++s) BOOST_TEST(at::allclose(gpu[s], cpu[s], 1e-4, 1e-5));
}

BOOST_AUTO_TEST_CASE(quantized_blocks_on_the_gpu_equal_the_cpu) {
  const at::Device device(at::kCUDA, cuda_index());
  using namespace mpiaccel::detail;
  const QuantizedBlock layout = quantized_block(1000, 2);
  at::manual_seed(3);
  const at::Tensor shard = at::randn({1000});
  const at::Tensor tags = at::tensor({1.0f, 2.0f});
  at::Tensor on_cpu = at::zeros({layout.stride}, at::kByte);
  at::Tensor on_gpu = at::zeros({layout.stride}, at::TensorOptions(at::kByte).device(device));
  quantize_blocks(shard.view({1, -1}), tags.view({1, -1}), layout, on_cpu);
  quantize_blocks(shard.to(device).view({1, -1}), tags.to(device).view({1, -1}), layout, on_gpu);
  BOOST_TEST(at::equal(on_gpu.cpu().narrow(0, 0, 1000), on_cpu.narrow(0, 0, 1000)));  // the int8 values
  const at::Tensor back = dequantize_blocks(on_gpu, layout, 1, at::TensorOptions(at::kFloat).device(device));
  BOOST_TEST(at::allclose(back.cpu(), dequantize_blocks(on_cpu, layout, 1, at::TensorOptions(at::kFloat)), 1e-6, 1e-7));
}
