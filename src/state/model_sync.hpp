#pragma once
// Making a replicated model identical on every rank (used by DDP at prepare,
// and by any strategy that starts from a full model): a cheap cross-rank check
// that every rank built the same model, then rank 0's values broadcast.

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace mpiaccel {

class Communicator;

/// A module's parameters then buffers, each with its fully qualified name
/// (LibTorch named_parameters()/named_buffers() order).
struct NamedTensor {
  std::string name;
  at::Tensor tensor;
  bool is_buffer = false;
};
std::vector<NamedTensor> module_tensors(const torch::nn::Module& module);

/// One line per parameter and buffer: "parameter NAME float32 [64, 32]".
std::string model_fingerprint(const torch::nn::Module& module);

/// Throws mpiaccel::Error with the same message on every rank when the names,
/// shapes or dtypes of parameters and buffers differ between ranks, e.g.
/// "model differs across ranks: rank 1: parameter fc.weight has shape [64, 32],
/// rank 0 has [32, 32]". One 8-byte all-gather when the models agree.
/// Collective over comm: every rank calls it, in the same order.
void check_same_model_across_ranks(Communicator& comm, const torch::nn::Module& module);

/// Copies rank 0's parameters and buffers into every rank's module, packed per
/// (dtype, device) into flat chunks of at most `chunk_bytes` (PyTorch DDP's
/// 250 MiB) so a model of many small tensors costs few broadcasts. Run
/// check_same_model_across_ranks first. Collective over comm: every rank calls
/// it, in the same order.
inline constexpr int64_t kBroadcastChunkBytes = int64_t{250} << 20;
void broadcast_module_state(Communicator& comm, torch::nn::Module& module,
                            int64_t chunk_bytes = kBroadcastChunkBytes);

/// Broadcasts `tensors` (any dtypes and devices) from `root`, packed as above.
/// Collective over comm: every rank calls it, in the same order.
void broadcast_tensors(Communicator& comm, const std::vector<at::Tensor>& tensors, int root = 0,
                       int64_t chunk_bytes = kBroadcastChunkBytes);

/// "[64, 32]".
std::string shape_text(at::IntArrayRef sizes);

}  // namespace mpiaccel
