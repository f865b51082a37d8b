// The NCCL entry points of a build without CUDA + NCCL (selected by CMake in
// place of nccl/nccl_*.cpp).

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel {

bool nccl_available() { return false; }

std::string nccl_version() { return ""; }

std::shared_ptr<Communicator> make_nccl(Communicator&, int cuda_index,
                                        std::chrono::milliseconds) {
  MPIACCEL_THROW("the NCCL communicator (CUDA device " + std::to_string(cuda_index) +
                 ") is not in this build of mpiaccel: CUDA or NCCL was not found when it was "
                 "configured; reconfigure with CUDAToolkit_ROOT and NCCL_ROOT set "
                 "(-DMPIACCEL_WITH_NCCL=ON), or use [distributed] backend = mpi");
}

}  // namespace mpiaccel
