#pragma once
// Hugging Face GPT-2 model directories (docs/checkpoint.md, "For
// transformers"): `mpiaccel ckpt export --format hf` writes one from a
// checkpoint, `[model] init_from` reads one (or a single .safetensors file)
// into the bundled GPT. Names and layouts: interop/hf_gpt2.hpp.

#include <cstdint>
#include <string>
#include <vector>

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

/// Writes the GPT of `reader`'s checkpoint into `dir` (created) as
/// transformers.GPT2LMHeadModel.from_pretrained(dir) loads it: the weights
/// in safetensors with GPT-2's names and layout (one file, or shards and
/// model.safetensors.index.json), config.json (GPT2Config from the
/// checkpoint's own config and tensor shapes) and, for a run on BPE token
/// files, the SentencePiece tokenizer.model. Returns the files written.
/// Throws mpiaccel::Error if the checkpoint holds no bundled GPT.
std::vector<std::string> export_hf_gpt2(const CheckpointReader& reader, const std::string& dir,
                                        const HfExport& options = {});

/// Copies a GPT-2-format model (a Hugging Face directory with
/// model.safetensors or a sharded index, or one .safetensors file) into the
/// parameters of the bundled GPT `gpt`. Every parameter of ours must be in
/// the file with the same shape (after the Conv1D transpose), and every
/// tensor of the file must be one of ours (or a tensor GPT-2 files carry that
/// we do not keep); otherwise it throws mpiaccel::Error naming what does not
/// match. Local.
void load_hf_gpt2(torch::nn::Module& gpt, const std::string& path);

}  // namespace mpiaccel::detail
