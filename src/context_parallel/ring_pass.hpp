#pragma once
// One step of a ring: a tensor to the next rank of the group, another from
// the previous, by point-to-point messages with the group's deadline.

#include <ATen/core/Tensor.h>

#include <string>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::cp::detail {

class RingPass {
 public:
  /// Sends `outgoing` to rank + 1 and receives a tensor like it from
  /// rank − 1 (mod size), tagged `tag`; `what` names the message in a
  /// deadline's abort ("cp ring step 2: keys and values"). Even ranks post
  /// the send first and odd ranks the receive, so a backend that runs one
  /// rank's messages in order (NCCL) cannot deadlock around the ring.
  RingPass(Communicator& group, const at::Tensor& outgoing, int tag, const std::string& what);
  RingPass(RingPass&&) = default;
  RingPass& operator=(RingPass&&) = default;

  /// Waits for both messages; returns what arrived.
  at::Tensor wait();

 private:
  at::Tensor incoming_;
  WorkHandle send_, recv_;
};

}  // namespace mpiaccel::cp::detail
