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

/// A parameter as rows (dim 0, what the strategies shard) of row_numel elements.
struct ParamRows {
  int64_t rows = 1;
  int64_t row_numel = 1;
  bool operator==(const ParamRows& o) const { return rows == o.rows && row_numel == o.row_numel; }
};

/// The parameter counts the estimate needs, for one model.
struct ModelFootprint {
  std::string kind;                 ///< the family's name
  int64_t params = 0;               ///< Ψ (the tied GPT head counted once)
  int64_t largest_unit_params = 0;  ///< U: the biggest unit (DecoderLayer, MlpBlock); 0 without units
  int64_t root_params = 0;          ///< R: parameters in no unit
  int64_t units = 0;                ///< number of units
  /// Every parameter once, in registration order; empty: shards are taken
  /// as ⌈Ψ/N⌉ (a model described by its count alone).
  std::vector<ParamRows> tensors;
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
  /// Its parameters in closed form (no model is built, so any size can be
  /// asked), as one rank of `tp` tensor-parallel ranks holds them. Throws
  /// Error naming the [model] key that tp does not divide.
  ModelFootprint (*footprint)(const ModelSpec& spec, int64_t tp);
  /// Bytes of activations kept for backward by one micro-batch of `batch`
  /// samples of `element_bytes` (include/mpiaccel/estimate.hpp).
  int64_t (*activation_bytes)(const ModelSpec& spec, int64_t batch, int64_t element_bytes, bool checkpointing,
                              int64_t tp, bool sequence_parallel);
  /// How many tensors its first and last pipeline pieces hold (its
  /// PipelineModel, pipeline_model.hpp; nullptr: it cannot be cut into stages).
  PipelinePieceTensors (*pipeline_piece_tensors)(const ModelSpec& spec);
  bool tensor_parallel;  ///< tensor_parallelize and context_parallelize split it
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
