// The dtype-name table (see dtype_names.hpp).
#include "core/dtype_names.hpp"

#include <array>

namespace mpiaccel {
namespace {

struct DtypeNames {
  at::ScalarType type;
  const char* name;
  const char* short_name;  // nullptr: the config has none
};

constexpr std::array<DtypeNames, 10> kDtypes{{
    {at::kFloat, "float32", "fp32"},
    {at::kDouble, "float64", nullptr},
    {at::kHalf, "float16", "fp16"},
    {at::kBFloat16, "bfloat16", "bf16"},
    {at::kLong, "int64", nullptr},
    {at::kInt, "int32", nullptr},
    {at::kShort, "int16", nullptr},
    {at::kChar, "int8", nullptr},
    {at::kByte, "uint8", nullptr},
    {at::kBool, "bool", nullptr},
}};

const DtypeNames* find(at::ScalarType type) {
  for (const auto& row : kDtypes) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

}  // namespace

std::string dtype_name(at::ScalarType type) {
  const auto* row = find(type);
  return row ? row->name : c10::toString(type);
}

std::string dtype_short_name(at::ScalarType type) {
  const auto* row = find(type);
  return row && row->short_name ? row->short_name : dtype_name(type);
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& row : kDtypes) {
    if (name == row.name) return row.type;
  }
  return std::nullopt;
}

std::optional<at::ScalarType> dtype_from_config_name(const std::string& name) {
  if (name == "float") return at::kFloat;
  if (name == "half") return at::kHalf;
  for (const auto& row : kDtypes) {
    if (row.short_name && name == row.short_name) return row.type;
  }
  return dtype_from_name(name);
}

}  // namespace mpiaccel
