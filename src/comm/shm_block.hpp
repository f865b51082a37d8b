#pragma once
// Internal: one block of node-shared memory that every rank of a communicator
// maps: the same bytes on every rank (docs/ddp.md, "Node-shared parameters").
// Rank 0 creates one POSIX shared-memory segment and the others map it; its
// name is unlinked as soon as every rank has mapped it, so a crashed job
// leaves nothing behind in /dev/shm.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "comm/shm_segment.hpp"

namespace mpiaccel::detail {

class ShmBlock {
 public:
  /// Creates and maps the block (`bytes`, rounded up to a page). Collective
  /// over the communicator of `collectives`. Returns nullptr on every rank if
  /// any rank could not map it; `why` then says why, on the ranks that failed.
  static std::shared_ptr<ShmBlock> create(int rank, int64_t bytes,
                                          const ShmSetupCollectives& collectives,
                                          std::string* why);
  ~ShmBlock();
  ShmBlock(const ShmBlock&) = delete;
  ShmBlock& operator=(const ShmBlock&) = delete;

  /// The block as a uint8 tensor that keeps it mapped.
  at::Tensor tensor(const std::shared_ptr<ShmBlock>& self) const;
  int64_t bytes() const { return bytes_; }

 private:
  ShmBlock() = default;
  void* mapping_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace mpiaccel::detail
