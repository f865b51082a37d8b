// The hook [ddp] comm_hook names.

#include <ATen/core/Tensor.h>

#include <cctype>

#include "mpiaccel/comm_hook.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Accelerate's DDPCommunicationHookType spellings become ours.
std::string canonical_hook(const std::string& name) {
  const std::string text = lower(name);
  if (text == "no") return "none";
  if (text == "power_sgd") return "powersgd";
  if (text == "batched_power_sgd") return "batched_powersgd";
  return text;
}

std::optional<at::ScalarType> sixteen_bit(const std::string& name) {
  if (name == "fp16") return at::kHalf;
  if (name == "bf16") return at::kBFloat16;
  return std::nullopt;
}

PowerSgdOptions powersgd_options(const DdpConfig& config, std::optional<at::ScalarType> reduce_dtype) {
  PowerSgdOptions options;
  options.rank = config.powersgd_rank;
  options.start_iter = config.powersgd_start_iter;
  options.min_compression_rate = config.powersgd_min_compression_rate;
  options.error_feedback = config.powersgd_error_feedback;
  options.warm_start = config.powersgd_warm_start;
  options.orthogonalization_epsilon = config.powersgd_orthogonalization_epsilon;
  options.seed = static_cast<uint64_t>(config.powersgd_seed);
  options.batched = canonical_hook(config.comm_hook) == "batched_powersgd";
  const auto wrapper = sixteen_bit(canonical_hook(config.comm_wrapper));
  options.allreduce_dtype = wrapper ? wrapper : reduce_dtype;
  return options;
}

}  // namespace

std::shared_ptr<CommHook> make_comm_hook(const DdpConfig& config, std::optional<at::ScalarType> reduce_dtype) {
  const std::string hook = canonical_hook(config.comm_hook);
  const std::string wrapper = canonical_hook(config.comm_wrapper);
  if (hook == "powersgd" || hook == "batched_powersgd")
    return make_powersgd_hook(powersgd_options(config, reduce_dtype));
  MPIACCEL_CHECK(wrapper == "none", "[ddp] comm_wrapper = " + config.comm_wrapper +
                                        " wraps PowerSGD's all-reduces; set comm_hook = powersgd or "
                                        "batched_powersgd, or comm_wrapper = none");
  if (hook == "none") return make_all_reduce_hook(reduce_dtype);
  const auto wire = sixteen_bit(hook);
  MPIACCEL_CHECK(wire.has_value(), "[ddp] comm_hook = " + config.comm_hook +
                                       " is not a hook; use none, fp16, bf16, powersgd or batched_powersgd");
  MPIACCEL_CHECK(!reduce_dtype || *reduce_dtype == *wire,
                 "[ddp] comm_hook = " + hook + " sends gradients in " + hook + " but the precision policy's "
                     "reduce_dtype is " + precision_dtype_name(*reduce_dtype) +
                     "; set one of them, or both to the same dtype");
  return make_all_reduce_hook(wire);
}

}  // namespace mpiaccel
