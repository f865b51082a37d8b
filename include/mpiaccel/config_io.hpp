#pragma once
// Reading the run configuration under MPI: one rank touches the file system,
// every rank parses the same bytes.

#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_files.hpp"

namespace mpiaccel {

/// Rank 0 reads the INI file at `path` and broadcasts its text; every rank
/// then parses those bytes with Config::parse and applies `overrides`
/// ("section.key=value"), so all ranks hold the same Config or all throw the
/// same ConfigError (when rank 0 cannot read the file, or the text or an
/// override is invalid). Collective over comm: every rank calls it, in the
/// same order.
Config load_config(Communicator& comm, const std::string& path,
                   const std::vector<std::string>& overrides = {});

/// The same for several files in any format of config_files.hpp: rank 0
/// reads each and broadcasts it; every rank runs resolve_config on the same
/// bytes, then checks DeepSpeed's batch arithmetic against comm's size.
Config load_config(Communicator& comm, const std::vector<std::string>& paths,
                   const std::vector<std::string>& overrides = {});

/// load_config's result with what set each key (ResolvedConfig::settings):
/// what a later step needs that fills only the keys no one set. Collective
/// over comm.
ResolvedConfig load_resolved_config(Communicator& comm, const std::vector<std::string>& paths,
                                    const std::vector<std::string>& overrides = {});

}  // namespace mpiaccel
