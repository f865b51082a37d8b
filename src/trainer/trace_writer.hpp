#pragma once
// Merges every rank's trace spans into one Chrome trace JSON file on rank 0.

#include <string>

namespace mpiaccel {
class Communicator;
}

namespace mpiaccel::detail {

/// Collective over comm. Rank 0 writes `path`.
void write_merged_trace(Communicator& comm, const std::string& path);

}  // namespace mpiaccel::detail
