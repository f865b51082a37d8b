#pragma once
// PyTorch's Python-side dtype names ("float32", "bfloat16"), used in messages
// and fingerprints so users see the names they know.

#include <c10/core/ScalarType.h>

#include <string>

namespace mpiaccel {

inline std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(type);
  }
}

}  // namespace mpiaccel
