// ctest: links mpiaccel; np 1; timeout 120; labels gpu
// The NCCL communicator on CUDA tensors, with the MPI communicator on CPU
// copies of the same data as the oracle. Needs a GPU per rank and a LibTorch
// built with CUDA; it fails (never skips) without them.
#define BOOST_TEST_MODULE comm_nccl
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "mpiaccel/error.hpp"

namespace {

using mpiaccel::ReduceOp;
using mpiaccel::test::world;

const std::vector<at::ScalarType> kAllTypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                               at::kInt,   at::kLong,   at::kByte};
const std::vector<int64_t> kSizes = {1, 1000, 65537};

bool is_floating(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Small integers from (seed, rank): exact in every dtype once summed.
at::Tensor data(int seed, int64_t n, at::ScalarType type) {
  at::Tensor i = at::arange(n, at::kLong);
  at::Tensor mixed = (i * 3 + seed * 31 + world().rank() * 7).remainder(17);
  mixed = type == at::kByte ? mixed.remainder(9) : mixed - 8;
  return mixed.to(type).contiguous();
}

mpiaccel::Communicator& nccl() {
  static std::shared_ptr<mpiaccel::Communicator> comm = [] {
    const int device = mpiaccel::test::runtime().device().cuda_index;
    BOOST_TEST_REQUIRE(at::hasCUDA(), "LibTorch has no CUDA: build against a CUDA LibTorch");
    BOOST_TEST_REQUIRE(device >= 0, "this test needs a CUDA device per rank; runtime chose "
                                        << mpiaccel::test::runtime().device().device);
    return mpiaccel::make_nccl(world(), device, std::chrono::seconds(60));
  }();
  return *comm;
}

at::Device gpu() { return at::Device(at::kCUDA, mpiaccel::test::runtime().device().cuda_index); }

// NCCL's result (copied back) equals the MPI oracle: exactly, or for Avg
// within one rounding of the dtype.
bool same(const at::Tensor& got_on_gpu, const at::Tensor& want, ReduceOp op) {
  at::Tensor got = got_on_gpu.cpu();
  if (got.scalar_type() != want.scalar_type() || got.sizes() != want.sizes()) return false;
  if (op != ReduceOp::Avg) return at::equal(got, want);
  return at::allclose(got.to(at::kDouble), want.to(at::kDouble), 1e-2, 1e-2);
}

std::string label(const char* op, at::ScalarType type, int64_t n, ReduceOp rop = ReduceOp::Sum) {
  return std::string(op) + " " + c10::toString(type) + " n=" + std::to_string(n) + " " +
         mpiaccel::reduce_op_name(rop);
}

}  // namespace

BOOST_AUTO_TEST_CASE(builds_with_nccl_and_bootstraps_over_mpi) {
  BOOST_TEST_REQUIRE(mpiaccel::nccl_available());
  BOOST_TEST(!mpiaccel::nccl_version().empty());
  BOOST_TEST_REQUIRE(at::hasCUDA(), "LibTorch has no CUDA: build against a CUDA LibTorch");
  MPIACCEL_CHECK_ALL(nccl().backend() == mpiaccel::Backend::Nccl);
  MPIACCEL_CHECK_ALL(nccl().rank() == world().rank() && nccl().size() == world().size());
}

BOOST_AUTO_TEST_CASE(all_reduce_matches_mpi) {
  nccl();  // fails here, clearly, without a GPU
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
        if (op == ReduceOp::Avg && !is_floating(type)) continue;
        at::Tensor cpu = data(1, n, type);
        at::Tensor cuda = cpu.to(gpu());
        world().all_reduce(cpu, op);
        nccl().all_reduce(cuda, op);
        BOOST_TEST_CONTEXT(label("all_reduce", type, n, op)) {
          MPIACCEL_CHECK_ALL(same(cuda, cpu, op));
        }
      }
}

BOOST_AUTO_TEST_CASE(reduce_scatter_all_gather_broadcast_match_mpi) {
  nccl();
  const int64_t p = world().size();
  for (at::ScalarType type : kAllTypes)
    for (int64_t n : kSizes) {
      at::Tensor input = data(2, n * p, type);
      at::Tensor out_cpu = at::empty({n}, input.options());
      at::Tensor out_gpu = at::empty({n}, input.options().device(gpu()));
      world().reduce_scatter(out_cpu, input, ReduceOp::Sum);
      nccl().reduce_scatter(out_gpu, input.to(gpu()), ReduceOp::Sum);
      BOOST_TEST_CONTEXT(label("reduce_scatter", type, n)) {
        MPIACCEL_CHECK_ALL(same(out_gpu, out_cpu, ReduceOp::Sum));
      }

      at::Tensor mine = data(3, n, type);
      at::Tensor all_cpu = at::empty({n * p}, mine.options());
      at::Tensor all_gpu = at::empty({n * p}, mine.options().device(gpu()));
      world().all_gather(all_cpu, mine);
      nccl().all_gather(all_gpu, mine.to(gpu()));
      BOOST_TEST_CONTEXT(label("all_gather", type, n)) {
        MPIACCEL_CHECK_ALL(same(all_gpu, all_cpu, ReduceOp::Sum));
      }

      std::vector<int64_t> counts;
      int64_t total = 0;
      for (int r = 0; r < p; ++r) counts.push_back(r % 2 == 0 ? n : 0), total += counts.back();
      at::Tensor piece = data(4, counts[static_cast<size_t>(world().rank())], type);
      at::Tensor uneven_cpu = at::empty({total}, piece.options());
      at::Tensor uneven_gpu = at::empty({total}, piece.options().device(gpu()));
      world().all_gather_uneven(uneven_cpu, piece, counts);
      nccl().all_gather_uneven(uneven_gpu, piece.to(gpu()), counts);
      BOOST_TEST_CONTEXT(label("all_gather_uneven", type, total)) {
        MPIACCEL_CHECK_ALL(same(uneven_gpu, uneven_cpu, ReduceOp::Sum));
      }

      at::Tensor b_cpu = data(5, n, type);
      at::Tensor b_gpu = b_cpu.to(gpu());
      world().broadcast(b_cpu, static_cast<int>(p - 1));
      nccl().broadcast(b_gpu, static_cast<int>(p - 1));
      BOOST_TEST_CONTEXT(label("broadcast", type, n)) {
        MPIACCEL_CHECK_ALL(same(b_gpu, b_cpu, ReduceOp::Sum));
      }
    }
}

BOOST_AUTO_TEST_CASE(async_handles_bytes_and_errors) {
  nccl();
  at::Tensor t = at::ones({1 << 20}, at::TensorOptions().device(gpu()));
  auto work = nccl().all_reduce_async(t, ReduceOp::Sum);
  auto barrier = nccl().barrier_async();
  mpiaccel::wait_all({work, barrier});
  MPIACCEL_CHECK_ALL(work->test() && barrier->test());
  MPIACCEL_CHECK_ALL(work->name() == "all_reduce" && work->finished_at() >= work->started_at());
  MPIACCEL_CHECK_ALL(at::all(t.cpu() == static_cast<float>(world().size())).item<bool>());

  MPIACCEL_CHECK_ALL(nccl().broadcast_bytes("from " + std::to_string(world().rank()), 0) ==
                     "from 0");
  MPIACCEL_CHECK_ALL(nccl().all_reduce_int(1) == world().size());
  bool cpu_refused = false, split_refused = false;
  try {
    nccl().all_reduce(at::ones({4}));
  } catch (const mpiaccel::Error& e) {
    cpu_refused = std::string(e.message()).find("CUDA tensors") != std::string::npos;
  }
  try {
    nccl().split(0, 0);
  } catch (const mpiaccel::Error& e) {
    split_refused = std::string(e.message()).find("split the MPI communicator") != std::string::npos;
  }
  MPIACCEL_CHECK_ALL(cpu_refused && split_refused);
}
