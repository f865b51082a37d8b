// Tensors between pipeline stages (see stage_messages.hpp).

#include "pipeline/stage_messages.hpp"

#include <ATen/ATen.h>
#include <mpi.h>

#include <climits>

#include <utility>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

constexpr int64_t kMaxDims = 8;
// Header: dtype, number of dimensions, the sizes.
constexpr int64_t kHeaderWords = 2 + kMaxDims;

// The largest tag this MPI library accepts (at least 32767 by the standard).
int64_t largest_tag() {
  static const int64_t largest = [] {
    int* bound = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &bound, &flag);
    return flag && bound ? int64_t{*bound} : int64_t{32767};
  }();
  return largest;
}

int tag_of(int64_t tag) {
  MPIACCEL_CHECK(tag >= 0 && tag <= largest_tag(),
                 "pipeline parallelism: message tag " + std::to_string(tag) + " (microbatch × stages + stage) " +
                     "is above this MPI's largest, MPI_TAG_UB = " + std::to_string(largest_tag()) +
                     ": use fewer microbatches per step");
  return static_cast<int>(tag);
}

}  // namespace

StageMessages::StageMessages(std::shared_ptr<Communicator> comm, std::string what)
    : comm_(std::move(comm)), what_(std::move(what)) {}

void StageMessages::send(const at::Tensor& tensor, int peer, int64_t tag, const std::string& between) {
  MPIACCEL_CHECK(tensor.dim() <= kMaxDims, "pipeline parallelism: a stage's " + what_ + " have " +
                                               std::to_string(tensor.dim()) + " dimensions, more than " +
                                               std::to_string(kMaxDims));
  at::Tensor header = at::zeros({kHeaderWords}, at::kLong);
  int64_t* h = header.data_ptr<int64_t>();
  h[0] = static_cast<int64_t>(tensor.scalar_type());
  h[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) h[2 + d] = tensor.size(d);
  const at::Tensor payload = tensor.detach().contiguous();
  const std::string name = what_ + " " + between;
  // Checked before the header goes out, so the peer is not left waiting for a payload.
  const int64_t bytes = payload.numel() * static_cast<int64_t>(payload.element_size());
  MPIACCEL_CHECK(comm_->backend() != Backend::Mpi || bytes <= INT_MAX,
                 "pipeline parallelism: the " + name + " are " + std::to_string(bytes) +
                     " bytes, more than one MPI message carries (2 GiB); use more microbatches");
  sends_.push_back(comm_->send_async(header, peer, tag_of(tag), name + " (header)"));
  sends_.push_back(comm_->send_async(payload, peer, tag_of(tag), name));
  bytes_sent_ += bytes;
}

at::Tensor StageMessages::receive(int peer, int64_t tag, const std::string& between, const at::Device& device) {
  const std::string name = what_ + " " + between;
  at::Tensor header = at::empty({kHeaderWords}, at::kLong);
  comm_->recv_async(header, peer, tag_of(tag), name + " (header)")->wait();
  const int64_t* h = header.data_ptr<int64_t>();
  MPIACCEL_CHECK(h[1] >= 0 && h[1] <= kMaxDims, "pipeline parallelism: a malformed header for " + name);
  const std::vector<int64_t> sizes(h + 2, h + 2 + h[1]);
  at::Tensor tensor = at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[0])).device(device));
  comm_->recv_async(tensor, peer, tag_of(tag), name)->wait();
  return tensor;
}

void StageMessages::finish_sends() {
  wait_all(sends_);
  sends_.clear();
}

}  // namespace mpiaccel::detail
