// [distributed] mixed_precision and its dtype overrides → PrecisionPolicy.

#include <cmath>
#include <string>
#include <utility>

#include "core/dtype_names.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel {
namespace {

// An override of one dtype: auto keeps what mixed_precision chose.
at::ScalarType resolve(DtypeChoice value, at::ScalarType chosen) {
  switch (value) {
    case DtypeChoice::Auto: return chosen;
    case DtypeChoice::Fp32: return at::kFloat;
    case DtypeChoice::Bf16: return at::kBFloat16;
    case DtypeChoice::Fp16: return at::kHalf;
  }
  return chosen;
}

}  // namespace

std::optional<at::ScalarType> wire_dtype(at::ScalarType policy_dtype) {
  if (policy_dtype == at::kFloat) return std::nullopt;
  return policy_dtype;
}

GradientDivision gradient_division(int world_size, std::optional<at::ScalarType> wire) {
  GradientDivision division;
  division.split = wire && c10::elementSize(*wire) < 4 && world_size > 1;
  if (!division.split) {
    division.before = 1.0 / world_size;
    return division;
  }
  const auto [first, second] = gradient_divide_factors(world_size);
  division.before = 1.0 / first;
  division.after = 1.0 / second;
  return division;
}

std::string precision_dtype_name(at::ScalarType dtype) { return dtype_short_name(dtype); }

at::ScalarType parse_precision_dtype(const std::string& name) {
  const auto dtype = dtype_from_config_name(name);
  const bool mixable = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
  MPIACCEL_CHECK(mixable, "dtype '" + name + "' is unknown; accepted: fp32, bf16, fp16");
  return *dtype;
}

PrecisionPolicy PrecisionPolicy::from_config(const DistributedConfig& config) {
  PrecisionPolicy policy;
  policy.mixed_precision = config.mixed_precision;
  const at::ScalarType base = config.mixed_precision == MixedPrecision::Bf16   ? at::kBFloat16
                              : config.mixed_precision == MixedPrecision::Fp16 ? at::kHalf
                                                                                : at::kFloat;
  // Like Accelerate's FSDP plugin: one mixed_precision value sets all three.
  policy.param_dtype = resolve(config.param_dtype, base);
  policy.reduce_dtype = resolve(config.reduce_dtype, base);
  policy.buffer_dtype = resolve(config.buffer_dtype, base);
  return policy;
}

std::string PrecisionPolicy::describe() const {
  return "param=" + precision_dtype_name(param_dtype) + " reduce=" + precision_dtype_name(reduce_dtype) +
         " buffer=" + precision_dtype_name(buffer_dtype);
}

std::pair<double, double> gradient_divide_factors(int world_size) {
  MPIACCEL_CHECK(world_size >= 1, "gradient_divide_factors: world size must be at least 1");
  // FSDP1's _get_gradient_predivide_factor: the largest power of two f with
  // world % f == 0 and f < world / f, i.e. about sqrt(world).
  int first = 1;
  while (world_size % first == 0 && world_size / first > first) first *= 2;
  return {double(first), double(world_size) / double(first)};
}

}  // namespace mpiaccel
