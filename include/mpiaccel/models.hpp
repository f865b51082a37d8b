#pragma once
// The bundled reference models: a GPT and a Llama for text (bytes or BPE
// tokens), and an MLP and a small CNN for Fashion-MNIST. Each is a torch::nn::Module (as_module()) that
// also answers this small Model interface, so the trainer can drive any of
// them without knowing which. The GPT and the Llama run their decoder layers through
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

class Communicator;

/// The sizes of a bundled model: the [model] section's (ModelConfig, in
/// config.hpp: each field and its default written once, there) and the
/// longest sequence. A family reads the fields it needs (GPT: n_layer ..
/// dropout and activation; the Llama the same but activation, and its own;
/// MLP and CNN hidden_size, the MLP mlp_layers).
struct ModelSpec : ModelConfig {
  int64_t block_size = 128;  ///< longest sequence (= [train] seq_len)

  /// The Llama's key/value heads, head width and SwiGLU width, with the
  /// defaults (0) resolved.
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t head_width() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  int64_t swiglu_width() const {
    return intermediate_size > 0 ? intermediate_size : (8 * n_embd / 3 + 255) / 256 * 256;
  }

  /// From the [model] section, with block_size = `seq_len` ([train] seq_len).
  static ModelSpec from(const ModelConfig& model, int64_t seq_len);
};

/// What the trainer needs of a model besides being a torch::nn::Module.
class Model {
 public:
  virtual ~Model() = default;
  /// GPT, Llama: int64 tokens [B, T] -> logits [B, T, vocab]. MLP/CNN: float images
  /// [B, 1, 28, 28] -> logits [B, 10].
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  /// Mean cross-entropy of `output` (forward's result) against `target`
  /// (GPT, Llama: [B, T] next tokens, over all B·T positions; MLP/CNN: [B] labels).
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& target) = 0;
  /// Its family's name (include/mpiaccel/model_family.hpp).
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

/// A new model of the family `kind` (model_family.hpp) sized by `spec`, initialised
/// from LibTorch's default generator: seed it (torch::manual_seed) first for
/// identical weights on every rank. Parameters are registered in a fixed order
/// with names such as "blocks.0.attn.qkv.weight" (the Llama's are
/// transformers' LlamaForCausalLM's: "model.layers.0.self_attn.q_proj.weight").
/// `init` may defer them.
std::shared_ptr<Model> make_model(const std::string& kind, const ModelSpec& spec,
                                  const ModelInit& init = {});

/// A model of `kind` with every parameter's name, shape, dtype and module,
/// and no values and no memory: built deferred (ModelInit) with LibTorch's
/// meta kernels standing in for every computation, so no initialiser runs.
/// What estimate-memory counts; any size can be asked (a 70-billion
/// parameter Llama builds in moments). Its forward must not run.
std::shared_ptr<Model> make_model_shapes(const std::string& kind, const ModelSpec& spec);

/// Splits a bundled GPT or Llama over the tensor-parallel `group` (the
/// mesh's tp group; docs/parallelism.md): attention by heads (key/value
/// heads held whole by several ranks when there are fewer than ranks), the
/// MLP by width, the vocabulary by rows, each rank keeping its slice of the
/// values the whole model was built with. Once, before Accelerator::prepare.
/// After it, forward() returns this rank's vocabulary slice of the logits,
/// loss() is the vocabulary-parallel cross-entropy (the logits are never
/// gathered) and generation gathers them. Throws Error, naming the key, when
/// the group's size does not divide n_head, vocab_size or the MLP's width,
/// or for a model that is not a GPT or a Llama.
void tensor_parallelize(Model& model, std::shared_ptr<Communicator> group, bool sequence_parallel = false);

/// Splits each sample's sequence of a bundled GPT or Llama over the
/// context-parallel `group` (the mesh's cp group; docs/parallelism.md):
/// forward() still takes the whole tokens [B, T] (the same on every rank of
/// the group) and returns the logits of this rank's zigzag shard
/// [B, T/cp, vocab] (cp::zigzag_shard), at their global positions; loss()
/// takes the whole target and returns the mean over this rank's shard, so
/// the mean over the group is the whole sequence's. Attention exchanges
/// over the group by `exchange`: ring or alltoall
/// (include/mpiaccel/context_parallel.hpp). Generation sees the whole
/// sequence. Once, before Accelerator::prepare, after tensor_parallelize if
/// both. Throws Error for a model that is not a GPT or a Llama, a dropout
/// above 0, or alltoall with heads that do not divide by the group.
void context_parallelize(Model& model, std::shared_ptr<Communicator> group,
                         CpCommStrategy exchange = CpCommStrategy::Ring);

/// The logits [B, T, vocab] of `tokens` from a GPT or a Llama, whole also
/// when the model is split by tensor_parallelize (gathered over the group:
/// collective then); another model's forward() as it is.
at::Tensor whole_logits(Model& model, const at::Tensor& tokens);

/// The Module::name()s of the modules a model of the family `kind` runs
/// through units().run (include/mpiaccel/unit.hpp; its ModelFamily's
/// unit_classes): GPT {"DecoderLayer"}, Llama {"LlamaDecoderLayer"}, MLP
/// {"MlpBlock"}, CNN none. Only these can be FSDP units that start sharded.
std::vector<std::string> model_unit_classes(const std::string& kind);

/// The unit classes FSDP and activation checkpointing pick in `model`: the
/// comma-separated names of `configured` ([fsdp] transformer_layer_cls_to_wrap),
/// or, when it is empty, the bundled model's model_unit_classes (none for a
/// model of the user's own: they must be named).
std::vector<std::string> units_to_wrap(const torch::nn::Module& model, const std::string& configured);

/// True when some parameter of `module` holds no memory (built deferred, or
/// resharded by FSDP).
bool has_deferred_parameters(const torch::nn::Module& module);

/// `model` as a torch::nn::Module, sharing ownership: what
/// Accelerator::prepare and optimizers take.
std::shared_ptr<torch::nn::Module> as_module(const std::shared_ptr<Model>& model);
/// `module` as a Model, or nullptr if it is not one.
std::shared_ptr<Model> as_model(const std::shared_ptr<torch::nn::Module>& module);

/// Number of parameter elements of `model` (a tied head counted once).
int64_t parameter_count(Model& model);

/// Sampling settings of generate().
struct GenerateOptions {
  int64_t n_tokens = 200;    ///< bytes (tokens) to generate
  double temperature = 0.8;  ///< <= 0: greedy (always the most likely byte)
  int64_t top_k = 40;        ///< sample among the k most likely; 0 = all
  uint64_t seed = 1234;      ///< a private generator: same seed, same text
};

/// Continues `prompt` (bytes; empty starts from a newline) with
/// options.n_tokens bytes sampled from a GPT or a Llama, in eval mode without
/// gradients (the training mode is restored after). Returns only the new
/// bytes. The context is the last block_size bytes; the keys and values of
/// the context are kept (a KV cache), so each new token costs one position's
/// forward until the context window slides. Through the model's units: with
/// FSDP installed it is collective (every rank calls it with the same
/// arguments). Throws Error if `model` is not a text model.
std::string generate(Model& model, const std::string& prompt, const GenerateOptions& options = {});

/// generate() over token ids (any vocabulary, e.g. BPE tokens that a
/// Tokenizer decodes): continues `prompt` (at least one id) and returns the
/// options.n_tokens new ids. Collective under FSDP, like generate().
std::vector<int64_t> generate_tokens(Model& model, const std::vector<int64_t>& prompt,
                                     const GenerateOptions& options = {});

}  // namespace mpiaccel
