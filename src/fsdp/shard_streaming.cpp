// Rank 0 streams FSDP shards to ranks that built the model deferred (see
// shard_streaming.hpp).

#include "fsdp/shard_streaming.hpp"

#include <ATen/core/grad_mode.h>
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <vector>

#include "fsdp/param_storage.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "state/model_sync.hpp"

namespace mpiaccel::detail {
namespace {

bool holds_memory(const at::Tensor& t) { return !t.defined() || storage_allocated(t); }

// The tensor to write `t`'s new values into: `t` itself, or, when it has no
// memory yet, an alias of its freshly refilled storage.
at::Tensor writable(const at::Tensor& t) { return holds_memory(t) ? t : allocate_storage(t); }

}  // namespace

bool agree_streamed_init(Communicator& comm, const torch::nn::Module& model) {
  bool lacks = false;
  for (const NamedTensor& t : module_tensors(model)) lacks = lacks || !holds_memory(t.tensor);
  all_ok(comm, !(comm.rank() == 0 && lacks),
         "FSDP prepare: rank 0's model has parameters without memory (built deferred?); "
         "rank 0 must build the model in full, since its values are streamed to the other "
         "ranks: build deferred (ModelInit::deferred) on ranks >= 1 only");
  return comm.all_reduce_int(lacks ? 1 : 0, ReduceOp::Max) != 0;
}

void broadcast_unsharded_state(Communicator& comm, torch::nn::Module& model) {
  std::vector<at::Tensor> tensors;
  for (const NamedTensor& t : module_tensors(model))
    if (t.is_buffer || !t.tensor.requires_grad()) tensors.push_back(writable(t.tensor));
  broadcast_tensors(comm, tensors, 0);
}

void stream_shards(Communicator& comm, int shard_index, BuiltUnits& built) {
  const bool sender = comm.rank() == 0;
  at::NoGradGuard no_grad;
  for (FsdpUnit& u : built.units) {
    const int64_t block = u.layout.block();
    const int parts = u.layout.parts();
    if (block == 0) continue;  // no parameters (the same on every rank)
    // Rank 0 packs the whole unit once; the others reuse one block.
    at::Tensor buffer = at::empty({sender ? parts * block : block}, u.full_options);
    if (sender)
      for (size_t s = 0; s < u.params.size(); ++s)
        u.layout.pack(buffer, block, s, built.params[u.params[s]].full);
    for (int r = 0; r < parts; ++r) {
      at::Tensor piece = sender ? buffer.narrow(0, r * block, block) : buffer;
      comm.broadcast(piece, 0);
      // Rank 0's own shards were copied from its full parameters already.
      if (!sender && r == shard_index) u.local.copy_(piece);  // (to the host with offload)
    }
  }

  // The root lives gathered (the model's own forward reads it before any
  // unit runs): every rank holds its full parameters, as after a full build.
  std::vector<at::Tensor> root;
  for (size_t p : built.units.front().params) root.push_back(writable(built.params[p].full));
  broadcast_tensors(comm, root, 0);
  for (size_t k = 1; k < built.units.size(); ++k) {
    FsdpUnit& u = built.units[k];
    for (size_t p : u.params) free_storage(built.params[p].full);
    u.gathered = false;
  }
}

}  // namespace mpiaccel::detail
