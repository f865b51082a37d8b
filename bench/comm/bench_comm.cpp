// Bus bandwidth of the MPI communicator against raw MPI, measured in the same
// run, interleaved.
//
//   bench_comm [CSV_PATH] [MAX_BYTES] [all_reduce]
//
// (A third argument, all_reduce, measures that op alone: bench/multinode's
// all-reduce between hosts, where every call crosses a slow link.)
//
// For each op (all_reduce, reduce_scatter, all_gather) and size (4 KiB to
// 256 MiB, x4), three ways of running it, interleaved in the same run:
//  - "ours": the blocking call (Communicator::all_reduce, ...) — what a caller
//    of the communicator gets: the op runs on the calling thread and the
//    communication thread is not woken for it (src/comm/comm_thread.hpp);
//  - "thread": the async call, then the caller polls test() (with a yield)
//    before wait(), so the op always runs on the communication thread — the
//    path DDP's overlap takes, hand-off cost included;
//  - "mpi": the blocking MPI call on a duplicate of the world, on the main
//    thread.
// Rounds rotate which side goes first; each side's figure is the best round's
// mean time per call (max over ranks), so a noisy neighbour on a shared
// machine hurts all sides alike.
//
// all_reduce_shm is all_reduce of a tensor in node-shared memory
// (Communicator::allocate_shared: the shared-memory all-reduce DDP's buckets
// use, docs/comm.md) against the same raw MPI_Allreduce; it is measured when
// the communicator offers shared memory (ranks on one node).
//
// Definitions follow nccl-tests: bytes = the full array (all_reduce buffer,
// reduce_scatter input, all_gather output); algbw = bytes / time; busbw =
// algbw * 2(n-1)/n for all_reduce and algbw * (n-1)/n for the other two.

#include <ATen/ATen.h>
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/runtime.hpp"
#include "runtime/check_mpi.hpp"
#include "runtime/runtime_mpi.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kRounds = 6;

struct Row {
  std::string op;
  int ranks;
  int64_t bytes;
  int iters;
  double ours_s, thread_s, mpi_s;  // mean seconds per call
  double factor;         // busbw / algbw
};

// Mean seconds per call of `call` over `iters` calls, the max over ranks.
double time_calls(MPI_Comm comm, int iters, const std::function<void()>& call) {
  MPIACCEL_CHECK_MPI(MPI_Barrier(comm));
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) call();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm));
  return seconds;
}

// The op through the communication thread: the caller never runs it.
void on_thread(const mpiaccel::WorkHandle& work) {
  while (!work->test()) std::this_thread::yield();
  work->wait();
}

Row measure(const std::string& op, int64_t bytes, int ranks, double factor, MPI_Comm comm,
            const std::function<mpiaccel::WorkHandle()>& start,
            const std::function<void()>& blocking, const std::function<void()>& raw) {
  const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / bytes, 3, 200));
  const std::function<void()> sides[3] = {
      blocking, [&] { on_thread(start()); }, raw};
  double best[3] = {1e30, 1e30, 1e30};
  for (const auto& side : sides) side();  // warm-up: page faults, MPI's internal buffers
  for (int round = 0; round < kRounds; ++round)
    for (int k = 0; k < 3; ++k) {
      const int s = (round + k) % 3;
      best[s] = std::min(best[s], time_calls(comm, iters, sides[s]));
    }
  return Row{op, ranks, bytes, iters, best[0], best[1], best[2], factor};
}

std::string size_text(int64_t bytes) {
  if (bytes >= (1 << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  // Open MPI's collectives malloc a temporary the size of the message on every
  // call (reduce_scatter: the whole input). On the main thread's arena glibc
  // gives such blocks back to the kernel on free (trim, or munmap above the
  // mmap threshold), so each raw call paid fresh page faults that calls on
  // another thread did not: raw reduce_scatter looked 2-4x slower than ours at
  // 1 MiB for a reason that has nothing to do with MPI. Keep freed memory, for
  // every side alike.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mpiaccel::Runtime runtime(&argc, &argv);
  const std::string csv_path = argc > 1 ? argv[1] : "bench_comm.csv";
  const int64_t max_bytes = argc > 2 ? std::atoll(argv[2]) : (int64_t{256} << 20);
  const bool all_reduce_only = argc > 3 && std::string(argv[3]) == "all_reduce";
  auto comm = mpiaccel::make_mpi_world(runtime, std::chrono::seconds(600));
  MPI_Comm raw = MPI_COMM_NULL;
  MPIACCEL_CHECK_MPI(MPI_Comm_dup(mpiaccel::detail::RuntimeAccess::world(runtime), &raw));
  const int n = comm->size();
  const double reduce_factor = 2.0 * (n - 1) / n, gather_factor = static_cast<double>(n - 1) / n;

  const at::Tensor shared_region = comm->allocate_shared(max_bytes);
  std::vector<Row> rows;
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    // Whole elements, divisible into n blocks.
    const int64_t count = std::max<int64_t>(n, bytes / 4 / n * n);
    const int64_t block = count / n;
    const int64_t used = count * 4;
    // Zeros: repeated sums never overflow or turn denormal.
    at::Tensor full = at::zeros({count}, at::kFloat);
    at::Tensor part = at::zeros({block}, at::kFloat);
    float* f = full.data_ptr<float>();
    float* p = part.data_ptr<float>();
    // Ours on `tensor` (ordinary or node-shared memory) against the same raw
    // MPI_Allreduce on ordinary memory.
    const auto measure_all_reduce = [&](const std::string& name, const at::Tensor& tensor) {
      rows.push_back(measure(
          name, used, n, reduce_factor, raw,
          [&] { return comm->all_reduce_async(tensor, mpiaccel::ReduceOp::Sum); },
          [&] { comm->all_reduce(tensor, mpiaccel::ReduceOp::Sum); },
          [&] {
            MPIACCEL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, f, static_cast<int>(count), MPI_FLOAT,
                                             MPI_SUM, raw));
          }));
    };
    measure_all_reduce("all_reduce", full);
    if (all_reduce_only) continue;
    if (shared_region.defined())
      measure_all_reduce("all_reduce_shm",
                         at::from_blob(shared_region.data_ptr(), {count}, at::kFloat).zero_());
    rows.push_back(measure(
        "reduce_scatter", used, n, gather_factor, raw,
        [&] { return comm->reduce_scatter_async(part, full, mpiaccel::ReduceOp::Sum); },
        [&] { comm->reduce_scatter(part, full, mpiaccel::ReduceOp::Sum); },
        [&] {
          MPIACCEL_CHECK_MPI(MPI_Reduce_scatter_block(f, p, static_cast<int>(block), MPI_FLOAT,
                                                      MPI_SUM, raw));
        }));
    rows.push_back(measure(
        "all_gather", used, n, gather_factor, raw,
        [&] { return comm->all_gather_async(full, part); },
        [&] { comm->all_gather(full, part); },
        [&] {
          MPIACCEL_CHECK_MPI(MPI_Allgather(p, static_cast<int>(block), MPI_FLOAT, f,
                                           static_cast<int>(block), MPI_FLOAT, raw));
        }));
  }

  if (comm->rank() == 0) {
    std::printf("# comm benchmark: %d ranks, float32, %s\n", n,
                runtime.mpi_library_version().c_str());
    std::printf("%-15s %7s %5s %9s %9s %9s %9s %9s %9s %6s %6s %8s %8s\n", "op", "size",
                "iters", "ours_us", "thread_us", "mpi_us", "ours_GB/s", "thrd_GB/s", "mpi_GB/s",
                "ratio", "thr_r", "ovh_us", "thr_ovh");
    std::ofstream csv(csv_path);
    csv << "op,ranks,bytes,iters,ours_us,thread_us,mpi_us,ours_algbw_GBps,ours_busbw_GBps,"
           "thread_busbw_GBps,mpi_busbw_GBps,ratio,thread_ratio,overhead_us,thread_overhead_us\n";
    for (const Row& r : rows) {
      const double ours_bus = r.bytes / r.ours_s * r.factor / 1e9;
      const double thread_bus = r.bytes / r.thread_s * r.factor / 1e9;
      const double mpi_bus = r.bytes / r.mpi_s * r.factor / 1e9;
      const double ratio = r.mpi_s / r.ours_s;  // busbw ours / busbw mpi
      const double thread_ratio = r.mpi_s / r.thread_s;
      const double overhead_us = (r.ours_s - r.mpi_s) * 1e6;
      const double thread_overhead_us = (r.thread_s - r.mpi_s) * 1e6;
      std::printf("%-15s %7s %5d %9.1f %9.1f %9.1f %9.3f %9.3f %9.3f %6.3f %6.3f %8.1f %8.1f\n",
                  r.op.c_str(), size_text(r.bytes).c_str(), r.iters, r.ours_s * 1e6,
                  r.thread_s * 1e6, r.mpi_s * 1e6, ours_bus, thread_bus, mpi_bus, ratio,
                  thread_ratio, overhead_us, thread_overhead_us);
      csv << r.op << ',' << r.ranks << ',' << r.bytes << ',' << r.iters << ',' << r.ours_s * 1e6
          << ',' << r.thread_s * 1e6 << ',' << r.mpi_s * 1e6 << ',' << r.bytes / r.ours_s / 1e9
          << ',' << ours_bus << ',' << thread_bus << ',' << mpi_bus << ',' << ratio << ','
          << thread_ratio << ',' << overhead_us << ',' << thread_overhead_us << '\n';
    }
    std::printf("# busbw as nccl-tests: all_reduce x2(n-1)/n, others x(n-1)/n; ratio = "
                "ours/mpi busbw, thr_r = thread/mpi; ovh = extra us per call; CSV: %s\n",
                csv_path.c_str());
  }
  comm.reset();
  MPI_Comm_free(&raw);
  return 0;
}
