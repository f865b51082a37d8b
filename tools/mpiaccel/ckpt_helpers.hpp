#pragma once
// Shared pieces of `mpiaccel ckpt` (ckpt_command.cpp, ckpt_export.cpp).

#include <string>

#include "mpiaccel/checkpoint.hpp"

namespace mpiaccel::tool {

/// `text` as a JSON string literal (quoted, escaped).
std::string json_string(const std::string& text);

/// Writes every tensor of `reader` (or only model/..., prefix stripped) to a
/// safetensors file `out` (through out.tmp + rename).
void export_safetensors(const CheckpointReader& reader, const std::string& out, bool model_only);

}  // namespace mpiaccel::tool
