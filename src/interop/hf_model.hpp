#pragma once
// Hugging Face model directories (docs/checkpoint.md, "For transformers"):
// `mpiaccel ckpt export --format hf` writes one from a checkpoint of the GPT
// (GPT2LMHeadModel) or the Llama (LlamaForCausalLM); `[model] init_from`
// reads one (or a single .safetensors file) into the bundled model. Names,
// layouts and config.json: models/hf_architecture.hpp.

#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/models.hpp"

namespace torch::nn {
class Module;
}

namespace mpiaccel {
class CheckpointReader;
}

namespace mpiaccel::detail {

struct HfExport {
  /// Tensor files larger than this are split into model-0000i-of-0000n
  /// shards with an index (Hugging Face's default: 5 GB).
  int64_t max_shard_bytes = int64_t{5} * 1000 * 1000 * 1000;
};

/// Writes the GPT or Llama of `reader`'s checkpoint into `dir` (created) as
/// transformers' GPT2LMHeadModel / LlamaForCausalLM.from_pretrained(dir)
/// loads it: the weights in safetensors with their names and layout (one
/// file, or shards and model.safetensors.index.json), config.json (from the
/// checkpoint's own config and tensor shapes) and, for a run on BPE token
/// files, the tokenizer (tokenizer.model, and tokenizer.json for
/// AutoTokenizer: hf_tokenizer.hpp). Returns the files written. Throws
/// mpiaccel::Error if the checkpoint holds neither model.
std::vector<std::string> export_hf_model(const CheckpointReader& reader, const std::string& dir,
                                         const HfExport& options = {});

/// Copies a Hugging Face model of our `kind` (a directory with
/// model.safetensors or a sharded index, or one .safetensors file) into the
/// parameters of `model`, built from `spec`. A directory's config.json must
/// describe `spec` (the Llama's: every LlamaConfig field we have a key for).
/// Every parameter of ours must be in the files with the same shape (after
/// GPT-2's Conv1D transpose), and every tensor of the files must be one of
/// ours (or one they keep that we do not); otherwise it throws
/// mpiaccel::Error naming what does not match. Local.
void load_hf_model(torch::nn::Module& model, const std::string& kind, const ModelSpec& spec,
                   const std::string& path);

}  // namespace mpiaccel::detail
