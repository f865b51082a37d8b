#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"

namespace mpiaccel {

DeviceChoice choose_device(int local_rank, int local_size, int visible_gpus,
                           bool allow_gpu_sharing) {
  DeviceChoice choice;
  choice.visible_gpus = visible_gpus;
  if (visible_gpus <= 0) return choice;  // CPU
  MPIACCEL_CHECK(local_size <= visible_gpus || allow_gpu_sharing,
                 std::to_string(local_size) + " ranks on this node but only " +
                     std::to_string(visible_gpus) +
                     " visible GPU(s): two ranks on one GPU is refused (NCCL cannot put them in "
                     "one communicator); start one rank per GPU (--ntasks-per-node / "
                     "--gpus-per-task), or set [distributed] allow_gpu_sharing = true");
  choice.cuda_index = local_rank % visible_gpus;
  choice.device = "cuda:" + std::to_string(choice.cuda_index);
  return choice;
}

}  // namespace mpiaccel
