// The backend-independent parts of the Communicator interface: the blocking
// forms, the scalar reductions and all_ok.

#include <cstring>

#include "mpiaccel/comm.hpp"
#include "comm/comm_thread.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

// Scalars are reduced through all_gather_bytes and folded locally in rank
// order: the same code serves the MPI and the NCCL communicator (whose bytes
// ops run over MPI), int64 sums stay exact, and every rank computes the
// bit-identical result from the same bytes.
template <typename T>
std::vector<T> gather_values(Communicator& comm, T value) {
  std::string bytes(sizeof(T), '\0');
  std::memcpy(bytes.data(), &value, sizeof(T));
  std::vector<T> values;
  for (const std::string& item : comm.all_gather_bytes(bytes)) {
    MPIACCEL_CHECK(item.size() == sizeof(T), "scalar reduction: a rank sent " +
                                                 std::to_string(item.size()) +
                                                 " bytes instead of " +
                                                 std::to_string(sizeof(T)));
    T v;
    std::memcpy(&v, item.data(), sizeof(T));
    values.push_back(v);
  }
  return values;
}

template <typename T>
T fold(const std::vector<T>& values, ReduceOp op) {
  T result = values.at(0);
  for (size_t i = 1; i < values.size(); ++i) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg: result += values[i]; break;
      case ReduceOp::Max: result = values[i] > result ? values[i] : result; break;
      case ReduceOp::Min: result = values[i] < result ? values[i] : result; break;
    }
  }
  if (op == ReduceOp::Avg) result /= static_cast<T>(values.size());
  return result;
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "unknown";
}

void wait_all(const std::vector<WorkHandle>& works) {
  for (const WorkHandle& work : works)
    if (work) work->wait();
}

WorkHandle Communicator::send_async(at::Tensor, int, int, const std::string& what) {
  MPIACCEL_THROW("send of " + what + ": the " + name_of(backend()) + " communicator has no point-to-point messages");
}

WorkHandle Communicator::recv_async(at::Tensor, int, int, const std::string& what) {
  MPIACCEL_THROW("recv of " + what + ": the " + name_of(backend()) + " communicator has no point-to-point messages");
}

void Communicator::all_reduce(at::Tensor tensor, ReduceOp op) {
  detail::CallerWaitsScope caller_waits;
  all_reduce_async(std::move(tensor), op)->wait();
}

void Communicator::reduce_scatter(at::Tensor output, at::Tensor input, ReduceOp op) {
  detail::CallerWaitsScope caller_waits;
  reduce_scatter_async(std::move(output), std::move(input), op)->wait();
}

void Communicator::all_gather(at::Tensor output, at::Tensor input) {
  detail::CallerWaitsScope caller_waits;
  all_gather_async(std::move(output), std::move(input))->wait();
}

void Communicator::all_gather_uneven(at::Tensor output, at::Tensor input,
                                     std::vector<int64_t> counts) {
  detail::CallerWaitsScope caller_waits;
  all_gather_uneven_async(std::move(output), std::move(input), std::move(counts))->wait();
}

void Communicator::all_to_all(at::Tensor output, at::Tensor input) {
  detail::CallerWaitsScope caller_waits;
  all_to_all_async(std::move(output), std::move(input))->wait();
}

void Communicator::broadcast(at::Tensor tensor, int root) {
  detail::CallerWaitsScope caller_waits;
  broadcast_async(std::move(tensor), root)->wait();
}

void Communicator::barrier() {
  detail::CallerWaitsScope caller_waits;
  barrier_async()->wait();
}

double Communicator::all_reduce_scalar(double value, ReduceOp op) {
  return fold(gather_values(*this, value), op);
}

int64_t Communicator::all_reduce_int(int64_t value, ReduceOp op) {
  return fold(gather_values(*this, value), op);
}

void all_ok(Communicator& comm, bool ok, const std::string& why) {
  // One collective on the happy path: the lowest failing rank, or size() if none.
  const int64_t size = comm.size();
  const int64_t first = comm.all_reduce_int(ok ? size : comm.rank(), ReduceOp::Min);
  if (first == size) return;
  const int64_t failed = comm.all_reduce_int(ok ? 0 : 1, ReduceOp::Sum);
  const std::string reason = comm.broadcast_bytes(why, static_cast<int>(first));
  std::string message = "rank " + std::to_string(first) + ": " + reason;
  if (failed > 1)
    message += " (and " + std::to_string(failed - 1) + " other rank" + (failed > 2 ? "s" : "") +
               " failed)";
  MPIACCEL_THROW(message);
}

}  // namespace mpiaccel
