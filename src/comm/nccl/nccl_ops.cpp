// The NCCL communicator's op issue path: argument checks, host tensors
// passed to the host communicator, and every op put on the NCCL stream in
// order behind the caller's stream (see nccl_communicator.cpp).

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>

#include "comm/nccl/nccl_communicator.hpp"
#include "comm/tensor_checks.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

ncclDataType_t nccl_datatype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kByte: return ncclUint8;
    default: break;
  }
  MPIACCEL_THROW(std::string("dtype ") + c10::toString(dtype) + " has no NCCL mapping");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Min: return ncclMin;
  }
  MPIACCEL_THROW("unknown ReduceOp");
}

}  // namespace

bool NcclCommunicator::on_host(std::initializer_list<at::Tensor> tensors) {
  bool host = true, device = true;
  for (const at::Tensor& t : tensors) {
    host = host && t.defined() && t.device().is_cpu();
    device = device && !(t.defined() && t.device().is_cpu());
  }
  MPIACCEL_CHECK(host || device, "an NCCL communicator op got host and CUDA tensors together: "
                                 "put them all on the GPU, or all on the host");
  return host;
}

void NcclCommunicator::check(const at::Tensor& tensor, const char* op,
                             const char* argument) const {
  check_tensor(tensor, op, argument, /*want_cuda=*/true, "NCCL");
  MPIACCEL_CHECK(tensor.device().index() == state_->device,
                 std::string(op) + ": `" + argument + "` is on " + tensor.device().str() +
                     " but this NCCL communicator runs on cuda:" +
                     std::to_string(state_->device));
}

WorkHandle NcclCommunicator::launch(const char* name, std::string description,
                                    std::vector<at::Tensor> tensors,
                                    const std::function<ncclResult_t()>& issue, bool host_waits) {
  const auto device = static_cast<c10::DeviceIndex>(state_->device);
  std::lock_guard<std::mutex> lock(mutex_);
  c10::cuda::CUDAGuard guard(device);
  const cudaStream_t compute = c10::cuda::getCurrentCUDAStream(device).stream();
  auto work = std::make_shared<NcclWork>(state_, name, description, tensors, anchor(), host_waits);
  work->order_after(compute, stream_->stream());
  for (const at::Tensor& t : tensors)
    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
  state_->settle(issue(), description);
  work->issued_on(stream_->stream());
  pending_.push_back(work);
  return work;
}

WorkHandle NcclCommunicator::all_reduce_async(at::Tensor tensor, ReduceOp op) {
  if (on_host({tensor})) return host_->all_reduce_async(std::move(tensor), op);
  check(tensor, "all_reduce", "tensor");
  check_reduce_op(op, tensor.scalar_type(), "all_reduce");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("all_reduce", describe_op("all_reduce", tensor), {tensor}, [&] {
    return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                         type, nccl_op(op), state_->comm, stream_->stream());
  });
}

WorkHandle NcclCommunicator::reduce_scatter_async(at::Tensor output, at::Tensor input,
                                                  ReduceOp op) {
  if (on_host({output, input})) return host_->reduce_scatter_async(std::move(output), std::move(input), op);
  const char* name = "reduce_scatter";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_reduce_op(op, input.scalar_type(), name);
  check_numel(input, output.numel() * size(), name, "input", "size() x output elements");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  return launch(name, describe_op(name, input), {output, input}, [&] {
    return ncclReduceScatter(input.data_ptr(), output.data_ptr(),
                             static_cast<size_t>(output.numel()), type, nccl_op(op), state_->comm,
                             stream_->stream());
  });
}

WorkHandle NcclCommunicator::all_gather_async(at::Tensor output, at::Tensor input) {
  if (on_host({output, input})) return host_->all_gather_async(std::move(output), std::move(input));
  const char* name = "all_gather";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_numel(output, input.numel() * size(), name, "output", "size() x input elements");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  return launch(name, describe_op(name, output), {output, input}, [&] {
    return ncclAllGather(input.data_ptr(), output.data_ptr(), static_cast<size_t>(input.numel()),
                         type, state_->comm, stream_->stream());
  });
}

WorkHandle NcclCommunicator::all_gather_uneven_async(at::Tensor output, at::Tensor input,
                                                     std::vector<int64_t> counts) {
  if (on_host({output, input}))
    return host_->all_gather_uneven_async(std::move(output), std::move(input), std::move(counts));
  const char* name = "all_gather_uneven";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_uneven_counts(counts, size(), rank(), output, input);
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  // NCCL has no all_gatherv: one broadcast per rank from its block, grouped
  // so NCCL runs them as one fused operation.
  return launch(name, describe_op(name, output), {output, input}, [&]() -> ncclResult_t {
    char* out = static_cast<char*>(output.data_ptr());
    const size_t element = output.element_size();
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return result;
    size_t offset = 0;
    for (int r = 0; r < size(); ++r) {
      const size_t count = static_cast<size_t>(counts[static_cast<size_t>(r)]);
      if (count > 0) {
        const void* send = r == rank() ? input.data_ptr() : out + offset * element;
        result = ncclBroadcast(send, out + offset * element, count, type, r, state_->comm,
                               stream_->stream());
        if (result != ncclSuccess && result != ncclInProgress) break;
      }
      offset += count;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result != ncclSuccess && result != ncclInProgress ? result : ended;
  });
}

// NCCL has no all-to-all: a send and a receive per peer, grouped so that
// NCCL runs them as one operation (no order between them to deadlock on).
WorkHandle NcclCommunicator::all_to_all_async(at::Tensor output, at::Tensor input) {
  if (on_host({output, input})) return host_->all_to_all_async(std::move(output), std::move(input));
  const char* name = "all_to_all";
  check(output, name, "output");
  check(input, name, "input");
  check_same_dtype(output, input, name);
  check_numel(output, input.numel(), name, "output", "the input's elements");
  MPIACCEL_CHECK(input.numel() % size() == 0, std::string(name) + ": " + std::to_string(input.numel()) +
                                                   " elements do not divide into " + std::to_string(size()) +
                                                   " blocks, one per rank");
  const ncclDataType_t type = nccl_datatype(input.scalar_type());
  return launch(name, describe_op(name, input), {output, input}, [&]() -> ncclResult_t {
    const size_t block = static_cast<size_t>(input.numel() / size());
    const size_t bytes = block * input.element_size();
    const char* in = static_cast<const char*>(input.data_ptr());
    char* out = static_cast<char*>(output.data_ptr());
    ncclResult_t result = ncclGroupStart();
    if (result != ncclSuccess) return result;
    for (int peer = 0; peer < size(); ++peer) {
      result = ncclSend(in + peer * bytes, block, type, peer, state_->comm, stream_->stream());
      if (result != ncclSuccess && result != ncclInProgress) break;
      result = ncclRecv(out + peer * bytes, block, type, peer, state_->comm, stream_->stream());
      if (result != ncclSuccess && result != ncclInProgress) break;
    }
    const ncclResult_t ended = ncclGroupEnd();
    return result != ncclSuccess && result != ncclInProgress ? result : ended;
  });
}

WorkHandle NcclCommunicator::broadcast_async(at::Tensor tensor, int root) {
  if (on_host({tensor})) return host_->broadcast_async(std::move(tensor), root);
  check(tensor, "broadcast", "tensor");
  check_root(root, size(), "broadcast");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("broadcast", describe_op("broadcast", tensor), {tensor}, [&] {
    return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                         type, root, state_->comm, stream_->stream());
  });
}

// NCCL matches point-to-point messages by their order between two ranks, not
// by tag: the caller sends in the order the peer receives (the pipeline
// keeps one communicator per direction for that, docs/parallelism.md).
WorkHandle NcclCommunicator::send_async(at::Tensor tensor, int peer, int tag, const std::string& what) {
  if (on_host({tensor})) return host_->send_async(std::move(tensor), peer, tag, what);
  check(tensor, "send", "tensor");
  check_root(peer, size(), "send");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("send", "send of " + what + " (" + describe_op("send", tensor) + ")", {tensor}, [&] {
    return ncclSend(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), type, peer, state_->comm,
                    stream_->stream());
  });
}

WorkHandle NcclCommunicator::recv_async(at::Tensor tensor, int peer, int tag, const std::string& what) {
  if (on_host({tensor})) return host_->recv_async(std::move(tensor), peer, tag, what);
  check(tensor, "recv", "tensor");
  check_root(peer, size(), "recv");
  const ncclDataType_t type = nccl_datatype(tensor.scalar_type());
  return launch("recv", "recv of " + what + " (" + describe_op("recv", tensor) + ")", {tensor}, [&] {
    return ncclRecv(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), type, peer, state_->comm,
                    stream_->stream());
  });
}

WorkHandle NcclCommunicator::barrier_async() {
  // A one-word all-reduce: complete only once every rank has issued it. Its
  // wait() blocks the host, as a barrier's caller expects.
  return launch("barrier", "barrier", {barrier_word_}, [&] {
    return ncclAllReduce(barrier_word_.data_ptr(), barrier_word_.data_ptr(), 1, ncclFloat32,
                         ncclSum, state_->comm, stream_->stream());
  }, /*host_waits=*/true);
}

}  // namespace mpiaccel::detail
