#pragma once
// Checkpoints of a tensor-parallel model (docs/parallelism.md, "Checkpoints").
// The strategy describes this rank's rows of its tensor-parallel slices; the
// file holds every tensor whole, each rank writing one range of whole rows,
// so any mesh and any strategy loads it and h5py reads it as it is.
//
// A slice of whole rows (Rows: column-parallel weights, vocabulary rows) is
// such a range as it is. A slice of every row (Columns: row-parallel weights;
// FusedRows: a fused q, k, v projection, held as [blocks, rows, ...]) is not:
// the ranks of a tp group hold the same rows of their slices, so one
// all-gather over the group makes those rows whole, and each rank writes an
// even part of them. Loading reverses it: each rank reads its part, and one
// all-gather gives every rank the whole rows it takes its slice of. A tensor
// every rank of the group holds whole (a norm, a row-parallel bias) is
// written as an even part of its rows by each, and read the same way.

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "mpiaccel/model_split.hpp"
#include "mpiaccel/state.hpp"
#include "mpiaccel/tensor_parallel.hpp"

namespace torch::nn {
class Module;
}
namespace mpiaccel {
class Communicator;
}

namespace mpiaccel::detail {

class TensorSplit : public ModelSplit {
 public:
  /// `splits`: the model's split parameters by name (tp::split_parameters);
  /// `split_params`: the same parameters' TensorImpls.
  TensorSplit(std::map<std::string, tp::ParamSplit> splits, std::unordered_set<const void*> split_params,
              std::shared_ptr<Communicator> tp);

  const char* dimension() const override { return "tp"; }
  Communicator& group() const override { return *tp_; }
  /// A slice on every rank; a parameter every rank holds whole on the
  /// group's first rank only.
  bool counts_in_grad_norm(const at::Tensor& param) const override;
  /// `local` (a strategy's state_dict) with every split tensor whole.
  /// Collective over the tp group.
  ShardedStateDict to_whole(ShardedStateDict local) override;
  /// `local` (a strategy's load_targets) as whole-tensor targets; after the
  /// checkpoint filled them, finish_load() puts each rank's slice into
  /// `local`'s tensors. Collective over the tp group (finish_load).
  ShardedStateDict whole_targets(ShardedStateDict local) override;
  void finish_load() override;

 private:
  // How one tensor of the strategy's state maps to whole rows.
  struct Mapping {
    enum class Way {
      AsIs,      // a slice of whole rows (ParamSplit::Rows): rows renumbered
      Gathered,  // slices of every row (Columns, FusedRows): all-gathered into whole rows
      Shared,    // held whole by every rank of the group: each writes a part
    };
    Way way = Way::Shared;
    std::vector<int64_t> whole_shape;
    int64_t first_whole_row = 0;  // of the group's rows (this rank's, AsIs)
    int64_t whole_rows = 0;       // rows the group writes together (Gathered, Shared)
  };
  struct PendingLoad {
    Mapping mapping;
    at::Tensor target;  // the strategy's destination
    at::Tensor read;    // this rank's part of the whole rows, filled by the checkpoint
  };

  /// The mapping of `t`: split when it is a parameter in splits_ or one of
  /// its optimizer slots of the same shape, shared otherwise.
  Mapping mapping_of(const ShardedTensor& t, const std::map<std::string, std::vector<int64_t>>& param_shapes) const;

  std::map<std::string, tp::ParamSplit> splits_;
  std::unordered_set<const void*> split_params_;
  std::shared_ptr<Communicator> tp_;
  std::vector<PendingLoad> pending_;
};

/// The tensor split of `model` after its layers were split over `tp`
/// (tensor_parallelize, tp::parallelize_module). Throws Error when the model
/// has no split layers.
std::shared_ptr<ModelSplit> tensor_split_of(torch::nn::Module& model, std::shared_ptr<Communicator> tp);

}  // namespace mpiaccel::detail
