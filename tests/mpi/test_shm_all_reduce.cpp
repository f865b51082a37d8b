// ctest: links mpiaccel; np 1 2 3 4; timeout 180
// The shared-memory all-reduce (allocate_shared + all_reduce of a tensor in
// it): every float dtype, op and size (3 ranks give uneven slices) against
// values each rank computes alone; bit-identical results on every rank and
// agreement with the MPI path on random data; many back-to-back ops mixed
// with MPI ones; a disagreement between ranks is an error on every rank; the
// opt-out; and no name left behind in /dev/shm.
#define BOOST_TEST_MODULE shm_all_reduce
#include "support/mpi_test.hpp"

#include <ATen/ATen.h>

#include <dirent.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpiaccel/error.hpp"

namespace {

using mpiaccel::ReduceOp;
using mpiaccel::test::world;

const std::vector<at::ScalarType> kFloatTypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};

// Rank r's data: small integers, exact in every dtype for sums of up to 4
// ranks (and their averages by 1, 2 and 4; by 3, see the tolerance).
at::Tensor values(int rank, int64_t numel) {
  return (at::arange(numel, at::kDouble) * 3 + rank * 7).fmod(17) - 8;
}

// The reduction over every rank's values(), in double.
at::Tensor expected(int64_t numel, ReduceOp op, int world_size) {
  at::Tensor acc = values(0, numel);
  for (int r = 1; r < world_size; ++r) {
    const at::Tensor x = values(r, numel);
    if (op == ReduceOp::Max) acc = at::maximum(acc, x);
    else if (op == ReduceOp::Min) acc = at::minimum(acc, x);
    else acc = acc + x;
  }
  return op == ReduceOp::Avg ? acc / world_size : acc;
}

// A tensor of `numel` elements at byte `offset` of the shared region.
at::Tensor carve(const at::Tensor& region, int64_t offset, int64_t numel, at::ScalarType type) {
  BOOST_REQUIRE(offset + numel * static_cast<int64_t>(c10::elementSize(type)) <= region.numel());
  return at::from_blob(static_cast<char*>(region.data_ptr()) + offset, {numel},
                       at::TensorOptions().dtype(type));
}

// MPIACCEL_CHECK_ALL / _REQUIRE_ALL, with this rank's reason in the log.
void check_all(bool ok, const std::string& why) {
  if (!ok) std::fprintf(stderr, "rank %d: %s\n", world().rank(), why.c_str());
  MPIACCEL_CHECK_ALL(ok);
}

void require_all(bool ok, const std::string& why) {
  if (!ok) std::fprintf(stderr, "rank %d: %s\n", world().rank(), why.c_str());
  MPIACCEL_REQUIRE_ALL(ok);
}

std::string bytes_of(const at::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()),
                     static_cast<size_t>(t.numel() * t.element_size()));
}

// Free bytes in /dev/shm (0 when it cannot be read).
int64_t dev_shm_free_bytes() {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

}  // namespace

BOOST_AUTO_TEST_CASE(shared_memory_is_offered_exactly_when_there_are_peers) {
  auto& comm = world();
  const at::Tensor region = comm.allocate_shared(1 << 20);
  // A host whose /dev/shm cannot hold the segments gets the documented
  // fallback (undefined, with a warning) instead; say so rather than fail.
  const bool room = comm.all_reduce_int(dev_shm_free_bytes() >= (int64_t{64} << 20) ? 1 : 0,
                                        ReduceOp::Min) == 1;
  if (!room && !region.defined()) {
    BOOST_TEST_MESSAGE("/dev/shm has under 64 MiB free: the shared-memory tests are skipped");
    return;
  }
  check_all(region.defined() == (comm.size() > 1),
                     "allocate_shared: defined=" + std::to_string(region.defined()));
  if (region.defined()) {
    BOOST_TEST(region.numel() >= (1 << 20));
    BOOST_TEST(region.scalar_type() == at::kByte);
  }
}

BOOST_AUTO_TEST_CASE(every_float_dtype_op_and_size) {
  auto& comm = world();
  // The 1M+3 doubles fit, and 4 ranks stay under a container's 64 MiB /dev/shm.
  const at::Tensor region = comm.allocate_shared(int64_t{9} << 20);
  if (!region.defined()) return;  // one rank: nothing to share
  for (const at::ScalarType type : kFloatTypes)
    for (const ReduceOp op : kOps)
      for (const int64_t numel : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{65537},
                                  (int64_t{1} << 20) + 3}) {
        // An offset that is not a multiple of 64: slices must not assume one.
        at::Tensor t = carve(region, 8 * 3, numel, type);
        t.copy_(values(comm.rank(), numel));
        comm.all_reduce(t, op);
        const at::Tensor got = t.to(at::kDouble);
        const at::Tensor want = expected(numel, op, comm.size());
        // Averages over 3 ranks round; everything else is exact.
        const double tolerance = (op == ReduceOp::Avg && comm.size() == 3)
                                     ? (type == at::kBFloat16 ? 0.05 : type == at::kHalf ? 0.01 : 1e-6)
                                     : 0.0;
        const bool ok = numel == 0 || (got - want).abs().max().item<double>() <= tolerance;
        check_all(ok, std::string(c10::toString(type)) + " op " +
                                   std::to_string(static_cast<int>(op)) + " numel " +
                                   std::to_string(numel) + " differs from the expected reduction");
      }
}

BOOST_AUTO_TEST_CASE(random_data_is_bit_identical_on_every_rank_and_matches_mpi) {
  auto& comm = world();
  const at::Tensor region = comm.allocate_shared(int64_t{5} << 20);
  if (!region.defined()) return;
  at::manual_seed(100 + comm.rank());
  const int64_t numel = (int64_t{1} << 20) + 12345;
  const at::Tensor data = at::randn({numel}, at::kFloat);
  at::Tensor shared = carve(region, 4096, numel, at::kFloat);
  shared.copy_(data);
  at::Tensor plain = data.clone();  // ordinary memory: the MPI path
  comm.all_reduce(shared, ReduceOp::Sum);
  comm.all_reduce(plain, ReduceOp::Sum);
  const auto everyone = comm.all_gather_bytes(bytes_of(shared));
  bool identical = true;
  for (const auto& other : everyone) identical = identical && other == everyone.front();
  check_all(identical, "the shared-memory all-reduce gave different bits on different ranks");
  const double gap = (shared - plain).abs().max().item<double>();
  check_all(gap <= 1e-5, "shared-memory and MPI sums differ by " + std::to_string(gap));
}

BOOST_AUTO_TEST_CASE(many_async_ops_mixed_with_mpi_ops_complete_in_order) {
  auto& comm = world();
  const at::Tensor region = comm.allocate_shared(int64_t{4} << 20);
  if (!region.defined()) return;
  constexpr int kBuckets = 6;
  constexpr int64_t kNumel = 50000;
  std::vector<at::Tensor> buckets;
  for (int b = 0; b < kBuckets; ++b) buckets.push_back(carve(region, b * kNumel * 4, kNumel, at::kFloat));
  for (int step = 0; step < 100; ++step) {
    std::vector<mpiaccel::WorkHandle> works;
    for (int b = 0; b < kBuckets; ++b) {
      buckets[static_cast<size_t>(b)].fill_(static_cast<float>(comm.rank() + b + step));
      works.push_back(comm.all_reduce_async(buckets[static_cast<size_t>(b)], ReduceOp::Sum));
      if (b == 2) works.push_back(comm.all_reduce_async(at::ones({3}), ReduceOp::Sum));  // MPI
    }
    mpiaccel::wait_all(works);
    const int n = comm.size();
    for (int b = 0; b < kBuckets; ++b) {
      const float want = static_cast<float>(n * (n - 1) / 2 + n * (b + step));
      const auto& t = buckets[static_cast<size_t>(b)];
      require_all(t.eq(want).all().item<bool>(),
                           "step " + std::to_string(step) + " bucket " + std::to_string(b) +
                               ": got " + std::to_string(t[0].item<float>()) + ", want " +
                               std::to_string(want));
    }
  }
}

BOOST_AUTO_TEST_CASE(ranks_reducing_different_tensors_fail_together) {
  auto& comm = world();
  const at::Tensor region = comm.allocate_shared(1 << 20);
  if (!region.defined()) return;
  // The last rank reduces a tensor at another offset: every rank must see it.
  const int64_t offset = comm.rank() == comm.size() - 1 ? 256 : 0;
  at::Tensor t = carve(region, offset, 1000, at::kFloat);
  std::string message;
  try {
    comm.all_reduce(t, ReduceOp::Sum);
  } catch (const mpiaccel::Error& e) {
    message = e.what();
  }
  check_all(message.find("every rank must all_reduce the same tensor") != std::string::npos,
                     "got: '" + message + "'");
  // The region still works afterwards: every rank took the same step.
  at::Tensor again = carve(region, 0, 1000, at::kFloat).fill_(1);
  comm.all_reduce(again, ReduceOp::Sum);
  check_all(again.eq(static_cast<float>(comm.size())).all().item<bool>(),
                     "the region is broken after a failed all_reduce");
}

BOOST_AUTO_TEST_CASE(ranks_asking_for_different_sizes_fail_together) {
  auto& comm = world();
  if (comm.size() < 2) return;
  std::string message;
  try {
    comm.allocate_shared(comm.rank() == comm.size() - 1 ? 8192 : 4096);
  } catch (const mpiaccel::Error& e) {
    message = e.what();
  }
  check_all(message.find("every rank must ask for the same size") != std::string::npos,
            "got: '" + message + "'");
}

BOOST_AUTO_TEST_CASE(opt_out_and_nothing_left_in_dev_shm) {
  auto& comm = world();
  ::setenv("MPIACCEL_SHM_ALLREDUCE", "0", 1);
  const at::Tensor none = comm.allocate_shared(1 << 20);
  ::unsetenv("MPIACCEL_SHM_ALLREDUCE");
  check_all(!none.defined(), "MPIACCEL_SHM_ALLREDUCE=0 still gave shared memory");

  const at::Tensor region = comm.allocate_shared(1 << 20);
  if (!region.defined()) return;
  // Segment names start with rank 0's pid; each rank unlinks its own before
  // it returns from allocate_shared.
  comm.barrier();
  const std::string prefix =
      "mpiaccel-" + comm.broadcast_bytes(std::to_string(::getpid()), 0) + "-";
  int left = 0;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (const dirent* entry = ::readdir(dir))
      if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) ++left;
    ::closedir(dir);
  }
  check_all(left == 0, std::to_string(left) + " segment name(s) " + prefix +
                                    "* left in /dev/shm while the region is alive");
}
