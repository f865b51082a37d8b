// The hook [ddp] comm_hook names.

#include <ATen/core/Tensor.h>

#include "mpiaccel/comm_hook.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/precision.hpp"

namespace mpiaccel {
namespace {

std::optional<at::ScalarType> sixteen_bit(CommWrapperChoice wrapper) {
  if (wrapper == CommWrapperChoice::Fp16) return at::kHalf;
  if (wrapper == CommWrapperChoice::Bf16) return at::kBFloat16;
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
  options.batched = config.comm_hook == CommHookChoice::BatchedPowerSgd;
  const auto wrapper = sixteen_bit(config.comm_wrapper);
  options.allreduce_dtype = wrapper ? wrapper : reduce_dtype;
  return options;
}

}  // namespace

std::shared_ptr<CommHook> make_comm_hook(const DdpConfig& config, std::optional<at::ScalarType> reduce_dtype) {
  const CommHookChoice hook = config.comm_hook;
  if (hook == CommHookChoice::PowerSgd || hook == CommHookChoice::BatchedPowerSgd)
    return make_powersgd_hook(powersgd_options(config, reduce_dtype));
  MPIACCEL_CHECK(config.comm_wrapper == CommWrapperChoice::None,
                 "[ddp] comm_wrapper = " + name_of(config.comm_wrapper) +
                     " wraps PowerSGD's all-reduces; set comm_hook = powersgd or "
                     "batched_powersgd, or comm_wrapper = none");
  if (hook == CommHookChoice::None) return make_all_reduce_hook(reduce_dtype);
  const at::ScalarType wire = hook == CommHookChoice::Fp16 ? at::kHalf : at::kBFloat16;
  MPIACCEL_CHECK(!reduce_dtype || *reduce_dtype == wire,
                 "[ddp] comm_hook = " + name_of(hook) + " sends gradients in " + name_of(hook) +
                     " but the precision policy's reduce_dtype is " + precision_dtype_name(*reduce_dtype) +
                     "; set one of them, or both to the same dtype");
  return make_all_reduce_hook(wire);
}

}  // namespace mpiaccel
