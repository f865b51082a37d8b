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
#include <memory>

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

/// This rank's slice [rank·n/size, (rank+1)·n/size) of `dim`, a view.
at::Tensor local_slice(const at::Tensor& full, int64_t dim, const Communicator& group);

// The layers below initialise the whole weight as torch::nn::Linear and
// Embedding do (same generator state on every rank: same tensor) and keep
// their slice, so a model's initial values, and with dropout 0 its training,
// are those of the unsplit model whatever the group's size.

/// y = x Wᵀ + b with W's output rows split over the group: this rank holds
/// rows [r·out/tp, (r+1)·out/tp) of W and b. The input is replicated; the
/// output is this rank's slice of the last dimension, or the whole of it
/// with `gather_output`.
class ColumnParallelLinear : public torch::nn::Module {
 public:
  ColumnParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool bias = true,
                           bool gather_output = false);
  at::Tensor forward(const at::Tensor& x);
  /// Copies this rank's rows from the full weight [out, in] (and bias [out]).
  void load_full(const at::Tensor& weight, const at::Tensor& bias = {});

  at::Tensor weight, bias;

 private:
  std::shared_ptr<Communicator> group_;
  bool gather_output_;
};

/// y = x Wᵀ + b with W's input columns split over the group: this rank holds
/// columns [r·in/tp, (r+1)·in/tp) of W; b is whole (replicated), added once
/// after the sum. The input is this rank's slice of the last dimension
/// (a column-parallel layer's output), or the whole of it unless
/// `input_is_parallel`; the output is replicated.
class RowParallelLinear : public torch::nn::Module {
 public:
  RowParallelLinear(int64_t in, int64_t out, std::shared_ptr<Communicator> group, bool bias = true,
                        bool input_is_parallel = true);
  at::Tensor forward(const at::Tensor& x);
  void load_full(const at::Tensor& weight, const at::Tensor& bias = {});

  at::Tensor weight, bias;

 private:
  std::shared_ptr<Communicator> group_;
  bool input_is_parallel_;
};

/// An embedding whose vocabulary rows are split over the group: this rank
/// holds rows [r·V/tp, (r+1)·V/tp); a token outside them contributes zeros,
/// and the sum over the group is every token's row.
class VocabParallelEmbedding : public torch::nn::Module {
 public:
  VocabParallelEmbedding(int64_t vocab, int64_t dim, std::shared_ptr<Communicator> group);
  at::Tensor forward(const at::Tensor& tokens);
  void load_full(const at::Tensor& weight);

  at::Tensor weight;

 private:
  std::shared_ptr<Communicator> group_;
  int64_t first_, rows_;
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
