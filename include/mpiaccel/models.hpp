#pragma once
// The bundled reference models: a GPT for byte-level text, and an MLP and a
// small CNN for Fashion-MNIST. Each is a torch::nn::Module (as_module()) that
// also answers this small Model interface, so the trainer can drive any of
// them without knowing which. The GPT runs its DecoderLayers through
// mpiaccel::HasUnits (include/mpiaccel/unit.hpp), which is how FSDP and
// activation checkpointing reach them.
//
// This header stays light (no <torch/nn.h>): the modules are defined in
// src/models/*.cpp, and callers see them through torch::nn::Module.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiaccel/config.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel {

/// The sizes of a bundled model. GPT reads n_layer .. dropout; MLP and CNN
/// read hidden_size (and mlp_layers for the MLP).
struct ModelSpec {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t vocab_size = 256;  ///< byte-level text
  int64_t block_size = 128;  ///< longest sequence (= [train] seq_len)
  double dropout = 0.0;
  int64_t hidden_size = 256;
  int64_t mlp_layers = 2;
  /// The GPT MLP's GELU: "gelu" (exact, erf) or "gelu_tanh" (the tanh
  /// approximation: GPT-2's gelu_new).
  std::string activation = "gelu";

  /// From the [model] section, with block_size = `seq_len` ([train] seq_len).
  static ModelSpec from(const ModelConfig& model, int64_t seq_len);
};

/// What the trainer needs of a model besides being a torch::nn::Module.
class Model {
 public:
  virtual ~Model() = default;
  /// GPT: int64 tokens [B, T] -> logits [B, T, vocab]. MLP/CNN: float images
  /// [B, 1, 28, 28] -> logits [B, 10].
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  /// Mean cross-entropy of `output` (forward's result) against `target`
  /// (GPT: [B, T] next tokens, over all B·T positions; MLP/CNN: [B] labels).
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& target) = 0;
  /// "gpt", "mlp" or "cnn".
  virtual std::string kind() const = 0;
  /// This model as the torch::nn::Module it is (parameters, train/eval, to).
  virtual torch::nn::Module& module() = 0;
};

/// How make_model() builds the parameters.
struct ModelInit {
  /// Deferred: the model has every parameter (names, shapes, dtypes, order:
  /// the cross-rank fingerprint is the same) but none holds memory; their
  /// values must come from elsewhere (FSDP streams rank 0's shards at
  /// prepare, docs/fsdp.md "Memory-efficient init"). Built module by module,
  /// each releasing its memory as soon as it exists, so the peak is one
  /// module (LibTorch's constructors initialise what they allocate). Reading
  /// a deferred parameter's values is undefined (its data pointer is null).
  /// The GPT's own re-initialisation is skipped, so LibTorch's default
  /// generator ends in another state than after a full build: reseed after.
  bool deferred = false;
  /// The device deferred parameters claim ("cpu", "cuda:0"): the one the
  /// model will run on, so that moving it there (Module::to) moves no data.
  std::string device = "cpu";
};

/// A new model of `kind` ("gpt", "mlp", "cnn") sized by `spec`, initialised
/// from LibTorch's default generator: seed it (torch::manual_seed) first for
/// identical weights on every rank. Parameters are registered in a fixed order
/// with names such as "blocks.0.attn.qkv.weight". `init` may defer them.
std::shared_ptr<Model> make_model(const std::string& kind, const ModelSpec& spec,
                                  const ModelInit& init = {});

/// The Module::name()s of the modules a model of `kind` runs through
/// units().run (include/mpiaccel/unit.hpp): GPT {"DecoderLayer"}, MLP
/// {"MlpBlock"}, CNN none. Only these can be FSDP units that start sharded.
std::vector<std::string> model_unit_classes(const std::string& kind);

/// True when some parameter of `module` holds no memory (built deferred, or
/// resharded by FSDP).
bool has_deferred_parameters(const torch::nn::Module& module);

/// `model` as a torch::nn::Module, sharing ownership: what
/// Accelerator::prepare and optimizers take.
std::shared_ptr<torch::nn::Module> as_module(const std::shared_ptr<Model>& model);
/// `module` as a Model, or nullptr if it is not one.
std::shared_ptr<Model> as_model(const std::shared_ptr<torch::nn::Module>& module);

/// Number of parameter elements of `model` (the tied GPT head counted once).
int64_t parameter_count(Model& model);

/// Sampling settings of generate().
struct GenerateOptions {
  int64_t n_tokens = 200;    ///< bytes (tokens) to generate
  double temperature = 0.8;  ///< <= 0: greedy (always the most likely byte)
  int64_t top_k = 40;        ///< sample among the k most likely; 0 = all
  uint64_t seed = 1234;      ///< a private generator: same seed, same text
};

/// Continues `prompt` (bytes; empty starts from a newline) with
/// options.n_tokens bytes sampled from a GPT, in eval mode without gradients
/// (the training mode is restored after). Returns only the new bytes. The
/// context is the last block_size bytes. Through the model's units: with
/// FSDP installed it is collective (every rank calls it with the same
/// arguments). Throws Error if `gpt` is not a GPT.
std::string generate(Model& gpt, const std::string& prompt, const GenerateOptions& options = {});

/// generate() over token ids (a GPT of any vocabulary, e.g. BPE tokens that a
/// Tokenizer decodes): continues `prompt` (at least one id) and returns the
/// options.n_tokens new ids. Collective under FSDP, like generate().
std::vector<int64_t> generate_tokens(Model& gpt, const std::vector<int64_t>& prompt,
                                     const GenerateOptions& options = {});

}  // namespace mpiaccel
