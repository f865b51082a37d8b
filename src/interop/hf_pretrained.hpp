#pragma once
// [model] init_from as transformers' from_pretrained (docs/data_and_models.md,
// "Starting from a Hugging Face model"): a model directory's config.json
// decides the family and every dimension; a key the user set must agree.

#include <string>

#include "mpiaccel/config_files.hpp"

namespace mpiaccel::detail {

/// Takes the family ([train] model) and every setting the config.json `text`
/// (read at `where`) decides (models/hf_architecture.hpp) into `resolved`:
/// a key that no file or override set (resolved.settings) is set from the
/// file; one that was set must agree, checked as the load checks the file
/// (one line naming the file's field and our key). Returns what was taken
/// ("train.model = llama, model.n_layer = 2, ..."; "" for nothing), for the
/// run's log. Throws Error. The same bytes give the same result on every
/// rank.
std::string resolve_pretrained_config(ResolvedConfig& resolved, const std::string& text, const std::string& where);

/// The config.json of the directory `init_from` names: false when it names
/// none (empty, a lone .safetensors file, or a directory without one); else
/// its path and text. Throws Error when the file cannot be read. Local.
bool read_pretrained_config(const std::string& init_from, std::string* path, std::string* text);

}  // namespace mpiaccel::detail
