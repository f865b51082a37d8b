#pragma once
// A family of bundled models ([train] model = NAME) is one folder,
// src/models/families/NAME/, holding its modules, its shapes in closed form
// and its registration: a ModelFamily, returned by
// detail::NAME_family() in that folder. The build finds the folders
// (src/models/CMakeLists.txt generates the list), so adding a family
// touches its own folder and a test, nothing else (docs/data_and_models.md,
// "Adding a model family"). Everything else asks the registry:
// make_model, the config's accepted [train] model values, FSDP's unit
// classes, estimate-memory, the trainer, `mpiaccel generate`, and the
// Hugging Face import and export (`hf`).

#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/models.hpp"

namespace mpiaccel {

namespace detail {
struct HfArchitecture;  // src/models/hf_architecture.hpp
}

/// How one of tp tensor-parallel ranks holds a parameter of the whole
/// model's shape [rows, ...] (docs/parallelism.md).
enum class TensorSplit {
  Whole,    ///< every rank the whole tensor
  Rows,     ///< rows/tp of it (a column-parallel layer's weight and bias, an embedding's vocabulary)
  Columns,  ///< every row, 1/tp of each (a row-parallel layer's weight)
  Fused3,   ///< q, k, v stacked: each third split by rows, held as [3, numel/3/tp]
};

/// How many of a text model's tensors (in registration order) its first
/// pipeline piece (the embeddings) and its last (final norm and head) hold,
/// and whether the head is the embedding again.
struct PipelinePieceTensors {
  size_t first = 0, last = 0;
  bool tied = false;
};

/// What a family registers. Function pointers that a family does not have
/// are nullptr.
struct ModelFamily {
  enum class Input {
    Tokens,  ///< int64 tokens [B, T] -> logits [B, T, vocab]; generates text
    Images,  ///< Fashion-MNIST images [B, 1, 28, 28] -> logits [B, 10]; classifies
  };
  const char* name;     ///< [train] model
  const char* summary;  ///< one line: what it is
  Input input;
  /// The Module::name()s it runs through units().run: FSDP's and activation
  /// checkpointing's default units (empty: none).
  std::vector<std::string> unit_classes;
  std::shared_ptr<Model> (*make)(const ModelSpec& spec, const ModelInit& init);
  /// Its tensor-parallel plan as estimate-memory counts it: how one of `tp`
  /// ranks holds the parameter `name`. nullptr: tensor and context
  /// parallelism do not split it (tensor_parallelize and context_parallelize
  /// refuse it).
  TensorSplit (*tensor_split)(const std::string& name, const ModelSpec& spec, int64_t tp);
  /// Throws Error naming the [model] key that `tp` ranks cannot split.
  void (*check_tensor_parallel)(const ModelSpec& spec, int64_t tp);
  /// Bytes of activations kept for backward by one micro-batch of `batch`
  /// samples of `element_bytes` (include/mpiaccel/estimate.hpp).
  int64_t (*activation_bytes)(const ModelSpec& spec, int64_t batch, int64_t element_bytes, bool checkpointing,
                              int64_t tp, bool sequence_parallel);
  /// How many tensors its first and last pipeline pieces hold (its
  /// PipelineModel, pipeline_model.hpp; nullptr: it cannot be cut into stages).
  PipelinePieceTensors (*pipeline_piece_tensors)(const ModelSpec& spec);
  /// Its transformers architecture (nullptr: none): tensor names both ways
  /// and config.json both ways.
  const detail::HfArchitecture* hf;
};

/// Every registered family, in the order of their names.
const std::vector<const ModelFamily*>& model_families();
/// The family named `name`; throws Error naming the ones there are.
const ModelFamily& model_family(const std::string& name);
/// The names of every family, comma-separated ("cnn, gpt, llama, mlp").
std::string model_family_names();

}  // namespace mpiaccel
