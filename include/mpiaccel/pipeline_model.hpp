#pragma once
// What a model declares so that pipeline parallelism can cut it into stages
// (include/mpiaccel/pipeline.hpp, docs/parallelism.md).

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mpiaccel {

/// The modules each piece of a model uses, by their registered paths ("wte",
/// "blocks.3"). A module named by two pieces that land on different stages
/// (a tied embedding: the first and the last) is held by both, its gradients
/// summed over them after each step.
struct PipelinePieces {
  std::vector<std::string> first;
  std::vector<std::vector<std::string>> layers;  ///< one entry per layer
  std::vector<std::string> last;
};

/// What a model declares so that it can be cut into pipeline stages.
class PipelineModel {
 public:
  virtual ~PipelineModel() = default;
  virtual PipelinePieces pipeline_pieces() const = 0;
  /// The first piece: the input (tokens) to the hidden state layer 0 takes.
  virtual at::Tensor pipeline_first(const at::Tensor& input) = 0;
  /// Layer `layer`: a hidden state to the next.
  virtual at::Tensor pipeline_layer(int64_t layer, const at::Tensor& hidden) = 0;
  /// The last piece: the last layer's hidden state and the target to the
  /// mean loss over the microbatch.
  virtual at::Tensor pipeline_last(const at::Tensor& hidden, const at::Tensor& target) = 0;
};

}  // namespace mpiaccel
