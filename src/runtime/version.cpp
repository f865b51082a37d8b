#include "mpiaccel/version.hpp"

namespace mpiaccel {

const char* version() { return MPIACCEL_VERSION_STRING; }

}  // namespace mpiaccel
