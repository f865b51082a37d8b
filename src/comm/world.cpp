// make_world: which communicator a run's tensors travel on (docs/comm.md,
// "Backends and devices").

#include <string>

#include "comm/staged_communicator.hpp"
#include "runtime/device_streams.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel {
namespace {

// Why this rank cannot run `backend` on its device, or "".
std::string backend_problem(const Runtime& runtime, Backend backend) {
  try {
    runtime.device();
  } catch (const Error& e) {
    return e.message();  // e.g. more ranks than GPUs without allow_gpu_sharing
  }
  const DeviceChoice& device = runtime.device();
  if (backend != Backend::Nccl) return "";
  if (device.cuda_index < 0)
    return "[distributed] backend = nccl needs a CUDA device, but this rank runs on the CPU "
           "(no GPU visible, or [distributed] device = cpu); use backend = auto or mpi";
  if (!nccl_available())
    return "[distributed] backend = nccl, but this build of mpiaccel has no NCCL communicator "
           "(configured without CUDA LibTorch or NCCL); use backend = auto or mpi";
  if (runtime.local_size() > device.visible_gpus)
    return "[distributed] backend = nccl, but " + std::to_string(runtime.local_size()) +
           " ranks on host " + runtime.host() + " share " + std::to_string(device.visible_gpus) +
           " GPU(s): NCCL refuses two ranks of one communicator on one GPU; start one rank per "
           "GPU, or use backend = mpi (device<->host staging) or auto";
  return "";
}

}  // namespace

std::shared_ptr<Communicator> make_world(const Runtime& runtime, Backend backend,
                                         std::chrono::milliseconds timeout) {
  std::shared_ptr<Communicator> mpi = make_mpi_world(runtime, timeout);
  const std::string problem = backend_problem(runtime, backend);
  all_ok(*mpi, problem.empty(), problem);
  const DeviceChoice& device = runtime.device();
  // Kernels and the CUDA context of this rank go to its own GPU, not GPU 0.
  if (device.cuda_index >= 0) detail::set_current_device(at::Device(device.device));
  // NCCL only when every rank has a GPU of its own, so all ranks pick alike.
  const bool own_gpu = device.cuda_index >= 0 && runtime.local_size() <= device.visible_gpus;
  const bool wants_nccl = backend == Backend::Nccl || (backend == Backend::Auto && nccl_available() && own_gpu);
  if (mpi->all_reduce_int(wants_nccl ? 1 : 0, ReduceOp::Min) == 1)
    return make_nccl(*mpi, device.cuda_index, timeout);
  if (mpi->all_reduce_int(device.cuda_index >= 0 ? 1 : 0, ReduceOp::Max) == 1)
    return detail::make_staged(std::move(mpi));
  return mpi;
}

}  // namespace mpiaccel
