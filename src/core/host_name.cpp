// local_host_name() (host_name.hpp).

#include "core/host_name.hpp"

#include <unistd.h>

#include <climits>

namespace mpiaccel::detail {

std::string local_host_name() {
  char name[HOST_NAME_MAX + 1] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

}  // namespace mpiaccel::detail
