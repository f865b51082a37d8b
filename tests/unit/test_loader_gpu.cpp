// ctest: links mpiaccel; timeout 120; labels gpu
// The loader's GPU path: host batches pinned (by the workers), copied either
// synchronously or on a side stream the compute stream waits for by an event
// (non_blocking). The device batches equal the host loader's, and work queued
// on the compute stream right after next() sees them complete. Runs only where
// CUDA is (label gpu, excluded by `make test`); without a GPU it fails.
#define BOOST_TEST_MODULE loader_gpu
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <memory>
#include <vector>

#include "data/batch_transfer.hpp"
#include "mpiaccel/data.hpp"

using mpiaccel::Batch;
using mpiaccel::DistributedLoader;
using mpiaccel::DistributedSampler;
using mpiaccel::LoaderOptions;

namespace {

// Large samples, so a copy takes long enough to be caught unfinished.
class WideDataset : public mpiaccel::Dataset {
 public:
  int64_t size() const override { return 64; }
  Batch get(const std::vector<int64_t>& indices) const override {
    at::Tensor rows = at::tensor(indices, at::kLong).to(at::kFloat).unsqueeze(1);
    return {rows.expand({-1, 1 << 20}).contiguous(), at::tensor(indices, at::kLong)};
  }
};

DistributedLoader loader_on(const std::string& device, LoaderOptions options) {
  auto data = std::make_shared<WideDataset>();
  return DistributedLoader(data, DistributedSampler(64, 0, 1, 3), 4, device, options);
}

}  // namespace

BOOST_AUTO_TEST_CASE(device_batches_equal_host_batches_in_every_mode) {
  BOOST_TEST_REQUIRE(at::hasCUDA(), "this test needs a CUDA device and a CUDA build of LibTorch");
  for (int64_t workers : {0, 2}) {
    for (bool non_blocking : {false, true}) {
      LoaderOptions options;
      options.num_workers = workers;
      options.non_blocking = non_blocking;
      DistributedLoader host = loader_on("cpu", {});
      DistributedLoader gpu = loader_on("cuda:0", options);
      for (int step = 0; step < 24; ++step) {
        const Batch want = host.next();
        const Batch got = gpu.next();
        BOOST_TEST(got.input.is_cuda());
        // Queued on the compute stream at once: ordered after the copy.
        const at::Tensor sums = got.input.sum(1).cpu();
        BOOST_TEST(at::equal(sums, want.input.sum(1)), "workers " << workers << " non_blocking " << non_blocking);
        BOOST_TEST(at::equal(got.target.cpu(), want.target));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(pinned_batches_are_page_locked) {
  BOOST_TEST_REQUIRE(at::hasCUDA(), "this test needs a CUDA device and a CUDA build of LibTorch");
  const Batch host = WideDataset().get({1, 2});
  const Batch pinned = mpiaccel::detail::pinned(host);
  BOOST_TEST(pinned.input.is_pinned());
  BOOST_TEST(pinned.target.is_pinned());
  BOOST_TEST(at::equal(pinned.input, host.input));
}
