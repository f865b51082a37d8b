#pragma once
// Internal: node-shared memory for in-place all-reduce (docs/comm.md, "The
// shared-memory all-reduce").
//
// When every rank of a communicator runs on one node, a tensor that each rank
// keeps in memory its peers can map needs no message at all: each rank sums
// its 1/P slice of the tensor straight out of every peer's copy and writes
// the result into every copy. Each rank reads the tensor's bytes once and
// writes them once, instead of the copies, fragments and extra additions of a
// message-based MPI_Allreduce, and the synchronisation is two counters in
// shared memory.
// DDP's gradient buckets are the user: they are allocated once and
// all-reduced every step (src/grad_sync/reducer.cpp).
//
// A ShmRegion is one POSIX shared-memory segment per rank, each mapped by
// every rank of the communicator. Its names are unlinked as soon as every rank
// has mapped them, so a crashed job leaves nothing behind in /dev/shm.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/shm_segment.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class ShmRegion {
 public:
  /// Creates and maps the region: `bytes` of usable memory per rank (rounded
  /// up to a page). Collective over the communicator of `collectives`. Returns
  /// nullptr on every rank if any rank could not (e.g. /dev/shm too small);
  /// `why` then says why, on the ranks that failed.
  static std::shared_ptr<ShmRegion> create(int rank, int size, int64_t bytes,
                                           const ShmSetupCollectives& collectives,
                                           std::string* why);
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  /// This rank's usable memory, as a uint8 tensor that keeps the region alive.
  at::Tensor tensor(const std::shared_ptr<ShmRegion>& self) const;
  /// Whether `tensor`'s data lies inside this rank's usable memory.
  bool contains(const at::Tensor& tensor) const;
  /// Whether all_reduce() handles this dtype and op (else use MPI).
  static bool supports(at::ScalarType dtype, ReduceOp op);

  /// In place: `tensor` (inside this region, at the same offset and of the
  /// same size and dtype on every rank) becomes the reduction of every rank's.
  /// Collective over the communicator: every rank calls it in the same order.
  /// Blocks until every rank has read this rank's data. Throws if the ranks'
  /// tensors disagree; never times out by itself (the communicator's deadline
  /// watcher ends a job whose peer never comes).
  void all_reduce(const at::Tensor& tensor, ReduceOp op);

  int64_t bytes() const { return usable_bytes_; }

 private:
  ShmRegion(int rank, int size) : rank_(rank), size_(size) {}
  struct Control;
  Control& control(int rank) const;
  char* data(int rank) const;

  int rank_, size_;
  int64_t usable_bytes_ = 0;
  int64_t mapped_bytes_ = 0;
  std::vector<void*> mappings_;  // one per rank, in rank order
  // Scratch of all_reduce (every rank's slice, read and written), sized once:
  // no allocation per op on the training step's path.
  std::vector<const void*> sources_;
  std::vector<void*> outs_;
  uint32_t sequence_ = 0;        // ops issued on this region so far
};

}  // namespace mpiaccel::detail
