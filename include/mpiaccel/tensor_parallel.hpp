#pragma once
// Tensor parallelism's building blocks (Megatron-LM, Shoeybi et al. 2019),
// over a tensor-parallel communicator (the mesh's "tp" group): layers whose
// weights each rank holds a slice of, and the collectives between them,
// written as autograd functions so backward communicates what it must.
//
//   x (replicated) ─► ColumnParallelLinear ─► y[.., out/tp] ─► act ─►
//                     RowParallelLinear ─► all-reduce ─► z (replicated)
//
// One all-reduce in forward (after the row-parallel layer) and one in backward
// (before the column-parallel layer's input gradient), whatever the width.
// docs/parallelism.md, "Tensor parallelism".

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/region_rng.hpp"

namespace mpiaccel {

class Communicator;

namespace tp {

// --- the collectives (f and g of the Megatron paper), differentiable.
/// Forward: `x` as it is; backward: the gradient summed over the group.
/// Where a replicated activation enters a column-parallel region.
at::Tensor copy_to_parallel(const at::Tensor& x, const std::shared_ptr<Communicator>& group);
/// Forward: `x` summed over the group; backward: the gradient as it is.
/// Where a row-parallel region's partial sums leave it.
at::Tensor reduce_from_parallel(const at::Tensor& x, const std::shared_ptr<Communicator>& group);
/// Forward: every rank's `x` concatenated along `dim` (rank order); backward:
/// this rank's slice of the gradient.
at::Tensor gather_from_parallel(const at::Tensor& x, int64_t dim, const std::shared_ptr<Communicator>& group);
/// Forward: this rank's slice of `x` along `dim`; backward: the slices'
/// gradients gathered. `dim` must divide by the group's size.
at::Tensor scatter_to_parallel(const at::Tensor& x, int64_t dim, const std::shared_ptr<Communicator>& group);

// Sequence parallelism's pair (Korthikanti et al. 2022): activations outside
// the tensor-parallel regions are split along the sequence (`dim`).
/// Forward: every rank's sequence shard concatenated along `dim`;
/// backward: the gradient reduce-scattered back to the shards (each rank's
/// region computed a partial gradient of the whole sequence).
at::Tensor gather_from_sequence(const at::Tensor& x, int64_t dim, const std::shared_ptr<Communicator>& group);
/// Forward: the partial sums reduce-scattered along `dim` (this rank's shard
/// of the sum); backward: the gradient all-gathered.
at::Tensor reduce_scatter_to_sequence(const at::Tensor& x, int64_t dim,
                                      const std::shared_ptr<Communicator>& group);
/// Forward: `x` as it is; backward: the gradient summed over the group. For a
/// parameter every rank holds whole but uses on its own part of the work (a
/// norm's weight on a sequence shard, a key/value head shared by several
/// ranks' query heads): the sum is the whole gradient.
inline at::Tensor sum_grad_over(const at::Tensor& param, const std::shared_ptr<Communicator>& group) {
  return copy_to_parallel(param, group);
}

/// This rank's slice [rank·n/size, (rank+1)·n/size) of `dim`, a view.
at::Tensor local_slice(const at::Tensor& full, int64_t dim, const Communicator& group);
/// This rank's slice of each of `blocks` equal blocks stacked along dim 0 (a
/// fused [q; k; v] projection: 3), concatenated; a copy when blocks > 1.
at::Tensor local_rows_of_blocks(const at::Tensor& full, int64_t blocks, const Communicator& group);

// --- splitting a model's layers after it is built (PyTorch's
// parallelize_module with ColwiseParallel / RowwiseParallel).

/// How a plan splits a layer.
struct Style {
  enum class Kind { Colwise, Rowwise, VocabRows };
  Kind kind = Kind::Colwise;
  /// Colwise: the weight is this many equal blocks stacked along dim 0 (a
  /// fused q, k, v projection: 3), each split alike, so heads stay whole.
  /// The split weight is then held as [blocks, out/blocks/tp, in] (the bias
  /// as [blocks, out/blocks/tp]): whole-row blocks of it are whole rows of
  /// the unsplit weight, which is what checkpoints need (split_parameters).
  int64_t fused_blocks = 1;
  /// Colwise: all-gather the output's last dimension.
  bool gather_output = false;
  /// Colwise: the input already entered the parallel region (the caller
  /// applied copy_to_parallel or gather_from_sequence once for several
  /// layers), so this layer adds no collective on its input.
  bool input_in_region = false;
  /// Rowwise: the input is already this rank's slice of the last dimension
  /// (a Colwise layer's output); otherwise it is scattered.
  bool input_is_parallel = true;
  /// Colwise: the input is a sequence shard, all-gathered along dim 1 (and
  /// its gradient reduce-scattered); Rowwise: the output is reduce-scattered
  /// along dim 1 instead of all-reduced.
  bool sequence_parallel = false;

  static Style colwise() { return {}; }
  static Style rowwise() { return Style{Kind::Rowwise}; }
  /// An Embedding whose vocabulary rows are split (VocabParallelEmbedding).
  static Style vocab_rows() { return Style{Kind::VocabRows}; }
};

/// While alive, on this thread, layers split with `sequence_parallel` run as
/// without it: a forward over one new position (generation through a KV
/// cache) has no sequence to split. Nests.
class WholeSequence {
 public:
  WholeSequence();
  ~WholeSequence();
  WholeSequence(const WholeSequence&) = delete;
  WholeSequence& operator=(const WholeSequence&) = delete;
  static bool active();

 private:
  bool previous_;
};

/// The weight gradients a zero-bubble pipeline schedule defers (ZB-H1,
/// docs/parallelism.md). A forward through a tp::Linear while a Recording
/// of this store is alive on the thread builds a backward that computes the
/// input's and the bias's gradients and keeps the weight's work here: the
/// weight, the layer's input and its output's gradient. apply() then
/// computes every kept weight gradient and accumulates it into the weight's
/// .grad through autograd, so gradient hooks (DDP's, FSDP's) fire as in any
/// backward. Any other layer computes its weight gradient in the backward.
class DeferredWeightGrads {
 public:
  DeferredWeightGrads();
  ~DeferredWeightGrads();
  DeferredWeightGrads(const DeferredWeightGrads&) = delete;
  DeferredWeightGrads& operator=(const DeferredWeightGrads&) = delete;

  /// While alive, tp::Linear forwards on this thread defer to `store`. Nests.
  class Recording {
   public:
    explicit Recording(DeferredWeightGrads& store);
    ~Recording();
    Recording(const Recording&) = delete;
    Recording& operator=(const Recording&) = delete;

   private:
    void* previous_;
  };

  /// Computes and accumulates the kept weight gradients, then forgets them.
  void apply();
  /// Weight gradients kept (their backwards ran) and not yet applied.
  size_t pending() const;

  struct Store;

 private:
  std::shared_ptr<Store> store_;
};

/// What torch::nn::Linear is (same options, parameter names "weight" and
/// "bias", same initialisation; its Module::name() is "Linear" where
/// LibTorch's is "torch::nn::LinearImpl"), until a plan splits it: then it holds its slice and its forward communicates as its
/// Style says. Write it where you would write torch::nn::Linear in a model
/// that a plan may split: LibTorch modules have no forward hooks, so a
/// torch::nn::Linear cannot be made to communicate from outside.
class Linear : public torch::nn::Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, const std::string& module_name = "Linear");
  at::Tensor forward(const at::Tensor& x);
  /// Keeps this rank's slice of the weight (and bias) as `style` says, in
  /// place (the parameters stay the same tensors, smaller). Once; a group of
  /// one rank keeps the whole layer as it is. Throws Error when a
  /// split dimension does not divide by the group's size.
  void parallelize(const Style& style, std::shared_ptr<Communicator> group);
  /// Copies this rank's slice from the whole weight [out, in] (and bias).
  void load_full(const at::Tensor& weight, const at::Tensor& bias = {});
  /// Split over a group of more than one rank.
  bool parallelized() const;
  const Style& style() const { return style_; }
  /// Output features this rank computes (its slice's rows).
  int64_t out_features() const { return weight.numel() / weight.size(-1); }

  at::Tensor weight, bias;

 private:
  Style style_;
  std::shared_ptr<Communicator> group_;
};

/// What torch::nn::Embedding is (weight N(0, 1), Module::name() "Embedding"),
/// until a plan splits its rows (Style::vocab_rows()): then a token outside
/// this rank's rows contributes zeros, and the output is summed over the
/// group (or, with sequence_parallel, reduce-scattered along dim 1).
class Embedding : public torch::nn::Module {
 public:
  Embedding(int64_t count, int64_t dim, const std::string& module_name = "Embedding");
  at::Tensor forward(const at::Tensor& tokens);
  void parallelize(const Style& style, std::shared_ptr<Communicator> group);
  void load_full(const at::Tensor& weight);
  /// The first row this rank holds (0 before a split).
  int64_t first_row() const { return first_; }
  /// Split over a group of more than one rank.
  bool parallelized() const;

  at::Tensor weight;

 private:
  Style style_;
  std::shared_ptr<Communicator> group_;
  int64_t first_ = 0;
};

/// A plan: module-name patterns and the style of the modules they match.
/// A pattern matches a dotted name part by part, each part a shell pattern
/// ("blocks.*.mlp.fc", "model.layers.*.self_attn.[qkv]_proj").
using Plan = std::vector<std::pair<std::string, Style>>;

/// Splits every module of `model` that a pattern of `plan` matches (the
/// first matching pattern's style) over `group`; returns the names split,
/// in the model's order. Throws Error naming a pattern that matches no
/// module, and a matched module that is neither a tp::Linear nor a
/// tp::Embedding.
std::vector<std::string> parallelize_module(torch::nn::Module& model, const std::shared_ptr<Communicator>& group,
                                            const Plan& plan);

/// How a parameter is split over the tensor-parallel group.
struct ParamSplit {
  enum class Kind {
    /// Along dim 0 (a column-parallel weight or bias, vocabulary rows): this
    /// rank holds the contiguous rows [r·n/tp, (r+1)·n/tp).
    Rows,
    /// Along dim 1 (a row-parallel weight): every rank holds part of each row.
    Columns,
    /// `blocks` fused blocks along dim 0, each split alike, held as
    /// [blocks, rows/blocks/tp, ...]: along dim 1 of that view.
    FusedRows,
  };
  Kind kind = Kind::Rows;
  int64_t blocks = 1;
};

/// The parameters of `model` that a split tp::Linear or tp::Embedding holds
/// a slice of, by their names in model.named_parameters(); a parameter not
/// listed is whole on every rank of the group.
std::map<std::string, ParamSplit> split_parameters(const torch::nn::Module& model);

/// The dropout stream of a parallel region (include/mpiaccel/region_rng.hpp).
using RegionRng = mpiaccel::RegionRng;

// The layers below initialise the whole weight as torch::nn::Linear and
// Embedding do (same generator state on every rank: same tensor) and keep
// their slice, so a model's initial values, and with dropout 0 its training,
// are those of the unsplit model whatever the group's size.

/// y = x Wᵀ + b with W's output rows split over the group: this rank holds
/// rows [r·out/tp, (r+1)·out/tp) of W and b. The input is replicated; the
/// output is this rank's slice of the last dimension, or the whole of it
/// with `gather_output`. A tp::Linear split Style::colwise() from the start.
class ColumnParallelLinear : public Linear {
 public:
  ColumnParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool bias = true,
                       bool gather_output = false);
};

/// y = x Wᵀ + b with W's input columns split over the group: this rank holds
/// columns [r·in/tp, (r+1)·in/tp) of W; b is whole (replicated), added once
/// after the sum. The input is this rank's slice of the last dimension
/// (a column-parallel layer's output), or the whole of it unless
/// `input_is_parallel`; the output is replicated. A tp::Linear split
/// Style::rowwise() from the start.
class RowParallelLinear : public Linear {
 public:
  RowParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool bias = true,
                    bool input_is_parallel = true);
};

/// An embedding whose vocabulary rows are split over the group: this rank
/// holds rows [r·V/tp, (r+1)·V/tp); a token outside them contributes zeros,
/// and the sum over the group is every token's row. A tp::Embedding split
/// Style::vocab_rows() from the start.
class VocabParallelEmbedding : public Embedding {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t dim, std::shared_ptr<Communicator> group);
};

/// The mean cross-entropy of logits whose vocabulary is split over the group
/// (this rank's [N, V/tp] slice, vocabulary rows as VocabParallelEmbedding
/// splits them) against `target` [N], without gathering the logits: the
/// maximum, the sum of exponentials and the target's logit are all-reduced.
/// Targets equal to `ignore_index` count for nothing. Differentiable.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& local_logits, const at::Tensor& target,
                                        const std::shared_ptr<Communicator>& group,
                                        int64_t ignore_index = -100);

}  // namespace tp
}  // namespace mpiaccel
