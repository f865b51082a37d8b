#pragma once
// The one table of dtype names: PyTorch's Python-side names ("float32",
// "bfloat16"), which messages, fingerprints and checkpoints use so users see
// the names they know, and the config's short names ("fp32", "bf16", "fp16").

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace mpiaccel {

/// "float32", "bfloat16", ...; c10's own name for a dtype outside the table.
std::string dtype_name(at::ScalarType type);

/// "fp32", "bf16" or "fp16" for the floating dtypes mixed precision uses;
/// dtype_name() for the others.
std::string dtype_short_name(at::ScalarType type);

/// The dtype a PyTorch name stands for ("float32"); nullopt if none.
std::optional<at::ScalarType> dtype_from_name(const std::string& name);

/// The dtype a config value stands for: a short or a PyTorch name, or
/// "float"/"half"; nullopt if none.
std::optional<at::ScalarType> dtype_from_config_name(const std::string& name);

}  // namespace mpiaccel
