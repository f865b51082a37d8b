#pragma once
// What the families' estimate-memory parts share (ModelFamily::tensor_split,
// check_tensor_parallel and activation_bytes, in each family's folder).

#include <cstdint>
#include <initializer_list>
#include <string>

#include "mpiaccel/error.hpp"
#include "mpiaccel/model_family.hpp"

namespace mpiaccel::detail {

inline constexpr int64_t kFp32 = 4;  ///< bytes of a float32

/// Throws Error unless [parallelism] tp_size `tp` divides [model] `key`'s `value`.
inline void check_tp_divides(int64_t value, const std::string& key, int64_t tp) {
  MPIACCEL_CHECK(value % tp == 0, "estimate-memory: [model] " + key + " " + std::to_string(value) +
                                      " does not divide by [parallelism] tp_size " + std::to_string(tp));
}

/// Whether the parameter name `name` ends with one of `suffixes`.
inline bool ends_with_any(const std::string& name, std::initializer_list<const char*> suffixes) {
  for (const char* suffix : suffixes) {
    const std::string tail(suffix);
    if (name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0) return true;
  }
  return false;
}

}  // namespace mpiaccel::detail
