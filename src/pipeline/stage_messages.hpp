#pragma once
// Internal: tensors between pipeline stages (pipeline.hpp). A message is a
// small header (dtype and shape) and then the tensor's bytes, both under one
// tag, so a receiver allocates what arrives; messages with the same peer and
// tag are matched in the order sent (MPI's rule; NCCL's is the order alone,
// which the schedules keep per direction). Each message names the stage,
// the microbatch and what it carries, for the deadline's message.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

class StageMessages {
 public:
  /// Over `comm` (one per direction: activations forward, gradients back),
  /// carrying `what` ("activations", "gradients").
  StageMessages(std::shared_ptr<Communicator> comm, std::string what);

  /// Starts sending `tensor` (kept alive until sent) to pipeline rank `peer`.
  void send(const at::Tensor& tensor, int peer, int64_t tag, const std::string& between);
  /// Receives the tensor `peer` sent under `tag`, on `device`.
  at::Tensor receive(int peer, int64_t tag, const std::string& between, const at::Device& device);
  /// Waits for every send started (at the end of a step).
  void finish_sends();
  /// Bytes sent since construction.
  int64_t bytes_sent() const { return bytes_sent_; }

 private:
  std::shared_ptr<Communicator> comm_;
  std::string what_;
  std::vector<WorkHandle> sends_;
  int64_t bytes_sent_ = 0;
};

}  // namespace mpiaccel::detail
