#pragma once
// Internal: [model] init_from's config.json taken into the run's config
// before anything is built (run_main; interop/hf_pretrained.hpp).

#include <string>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config_files.hpp"

namespace mpiaccel::detail {

/// When [model] init_from names a directory with a config.json, rank 0
/// reads it and every rank takes the family and the model's dimensions from
/// the same bytes (resolve_pretrained_config). Returns the line the run logs
/// ("" when nothing was taken). Collective over comm; a bad file throws the
/// same Error on every rank.
std::string apply_pretrained_config(Communicator& comm, ResolvedConfig& resolved);

}  // namespace mpiaccel::detail
