// ctest: links mpiaccel
// A job in which rank 1 never joins an all_reduce, for
// tests/scripts/test_comm_deadline.sh: the communicator's deadline must end
// the whole job with a message naming the op, instead of hanging.
//
//   comm_deadline_helper TIMEOUT_MS wait|nowait|shared
//
// wait:   the other ranks block in all_reduce (the blocking form).
// nowait: the other ranks start it async and never wait on it, so only the
//         communicator's own watcher can notice.
// shared: as wait, on a tensor in node-shared memory (allocate_shared), so
//         the shared-memory all-reduce is what waits for rank 1.

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/runtime.hpp"

int main(int argc, char** argv) {
  mpiaccel::Runtime runtime(&argc, &argv);
  if (argc != 3) {
    std::fprintf(stderr, "usage: comm_deadline_helper TIMEOUT_MS wait|nowait|shared\n");
    return 2;
  }
  const auto timeout = std::chrono::milliseconds(std::atoll(argv[1]));
  const std::string mode = argv[2];
  auto world = mpiaccel::make_mpi_world(runtime, timeout);
  const int64_t bytes = int64_t{4} << 20;
  const at::Tensor region = mode == "shared" ? world->allocate_shared(bytes) : at::Tensor();
  if (mode == "shared" && !region.defined()) {
    std::fprintf(stderr, "comm_deadline_helper: allocate_shared gave no shared memory\n");
    return 3;
  }
  world->barrier();  // every rank is up and the communicator works
  if (world->rank() == 1) {
    // Withhold the collective; MPI_Abort from a peer ends this sleep.
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 0;
  }
  at::Tensor tensor = region.defined() ? at::from_blob(region.data_ptr(), {1 << 20}, at::kFloat).fill_(1)
                                       : at::ones({1 << 20}, at::kFloat);  // 4194304 bytes
  if (mode != "nowait") {
    world->all_reduce(tensor);
  } else {
    auto work = world->all_reduce_async(tensor, mpiaccel::ReduceOp::Sum);
    std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  std::fprintf(stderr, "comm_deadline_helper: the withheld all_reduce completed?!\n");
  return 0;
}
