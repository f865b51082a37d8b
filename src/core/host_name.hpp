#pragma once
// This machine's host name, for errors, node grouping and file names.

#include <string>

namespace mpiaccel::detail {

/// gethostname(), or "unknown-host" when it fails.
std::string local_host_name();

}  // namespace mpiaccel::detail
