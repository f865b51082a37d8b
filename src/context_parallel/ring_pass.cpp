// RingPass (ring_pass.hpp).

#include "context_parallel/ring_pass.hpp"

#include <ATen/ATen.h>

namespace mpiaccel::cp::detail {

RingPass::RingPass(Communicator& group, const at::Tensor& outgoing, int tag, const std::string& what) {
  const int size = group.size(), rank = group.rank();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const at::Tensor message = outgoing.contiguous();
  incoming_ = at::empty_like(message);
  const std::string from = what + " from cp rank " + std::to_string(previous);
  const std::string to = what + " to cp rank " + std::to_string(next);
  if (rank % 2 == 0) {
    send_ = group.send_async(message, next, tag, to);
    recv_ = group.recv_async(incoming_, previous, tag, from);
  } else {
    recv_ = group.recv_async(incoming_, previous, tag, from);
    send_ = group.send_async(message, next, tag, to);
  }
}

at::Tensor RingPass::wait() {
  recv_->wait();
  send_->wait();
  return incoming_;
}

}  // namespace mpiaccel::cp::detail
