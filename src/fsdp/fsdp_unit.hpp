#pragma once
// The data of FSDP: parameters and units (internal).

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "fsdp/flat_layout.hpp"
#include "mpiaccel/comm.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel::detail {

enum class FsdpGatherKind { Full, Int8, InGroup };
/// For the trace's span names: "", " int8", " in group".
inline const char* trace_suffix(FsdpGatherKind kind) {
  return kind == FsdpGatherKind::Int8 ? " int8" : kind == FsdpGatherKind::InGroup ? " in group" : "";
}

/// One sharded parameter.
struct FsdpParam {
  std::string name;  ///< first fully qualified name (model.named_parameters())
  at::Tensor full;   ///< the module's own parameter; its storage is empty while sharded
  at::Tensor shard;  ///< this rank's rows, a view of the unit's `local`: what the optimizer updates
  size_t unit = 0;   ///< index into the units
  size_t slot = 0;   ///< index into the unit's layout
};

/// A group of parameters gathered and reduced together. Unit 0 is the root
/// (the parameters no wrapped module holds).
struct FsdpUnit {
  std::string name;                     ///< module path ("blocks.0"); "" for the root
  std::string cls;                      ///< Module::name() of its module
  torch::nn::Module* module = nullptr;  ///< nullptr for the root
  size_t index = 0;
  std::vector<size_t> params;  ///< indices into the parameters, in layout order
  FlatLayout layout;
  at::Tensor local;            ///< [block]: this rank's shards, back to back, padded
                               ///< (on the CPU with cpu_offload)
  at::TensorOptions full_options;  ///< dtype and device of the full parameters
  int64_t full_bytes = 0;      ///< bytes of the unit's full parameters

  // Parameters of a unit that is not resharded live gathered: the root's
  // (LibTorch gives no hook before the model's own forward) and those of a
  // unit the model has never run through units().run.
  bool managed = false;   ///< ran through the interceptor at least once
  bool gathered = true;   ///< full parameters hold data
  WorkHandle gather_work; ///< an all-gather in flight (prefetch)
  at::Tensor gather_buffer;
  /// What gather_buffer holds: the blocks as they are, int8 blocks (ZeRO++
  /// qwZ), or the secondary group's parts (ZeRO++ hpZ).
  FsdpGatherKind gather_kind = FsdpGatherKind::Full;
  /// ZeRO++ hpZ: this rank's part of the gathered buffer (1/secondary group
  /// of it), kept from forward's gather until the unit's gradients are done;
  /// backward gathers it within the secondary group instead of the world.
  at::Tensor secondary;

  // Backward bookkeeping, reset at the end of each backward.
  WorkHandle reduce_work;
  at::Tensor reduce_out;       ///< [block]: this rank's averaged gradient rows
  at::Tensor reduce_received;  ///< ZeRO++ qgZ: every rank's int8 block for this rank, until summed
  int64_t last_invocation = -1; ///< position in this forward's unit order

  bool persistent() const { return module == nullptr || !managed; }
  std::string display_name() const { return name.empty() ? "<root>" : name; }
};

}  // namespace mpiaccel::detail
