// The default hook and the fp16/bf16 compression hooks: an all-reduce of the
// bucket, averaged.

#include "comm_hooks/all_reduce_hook.hpp"

#include <ATen/ATen.h>

#include "mpiaccel/precision.hpp"

namespace mpiaccel {
namespace detail {

HookWork average_async(Communicator& comm, at::Tensor values, at::Tensor wire, const GradientDivision& division) {
  const at::Tensor& sent = wire.defined() ? wire : values;
  HookWork result;
  if (!division.split) {
    // Full width: the all-reduce averages as it sums, no pass of its own.
    if (wire.defined()) wire.copy_(values);
    result.work = comm.all_reduce_async(sent, ReduceOp::Avg);
    if (wire.defined()) result.finish = [values, wire]() mutable { values.copy_(wire); };
    return result;
  }
  // 16 bits: divide by `before` on the way in (fused with the cast), sum,
  // divide by `after` on the way out.
  const double before = division.before;
  const double after = division.after;
  if (wire.defined()) at::mul_out(wire, values, at::scalar_tensor(before, at::kDouble));
  else values.mul_(before);
  result.work = comm.all_reduce_async(sent, ReduceOp::Sum);
  result.finish = [values, sent, after]() mutable {
    // Widened first, then divided in the values' dtype (a 16-bit product would round again).
    if (!values.is_same(sent)) values.copy_(sent);
    if (after != 1.0) values.mul_(after);
  };
  return result;
}

namespace {

class AllReduceHook final : public CommHook {
 public:
  explicit AllReduceHook(std::optional<at::ScalarType> wire) : wire_(wire) {}

  std::string name() const override {
    return wire_ ? precision_dtype_name(*wire_) : std::string("all_reduce");
  }
  std::optional<at::ScalarType> wire_dtype_for(at::ScalarType bucket_dtype) const override {
    if (wire_ && *wire_ != bucket_dtype) return wire_;
    return std::nullopt;
  }
  HookWork launch(GradBucket& bucket) override {
    return average_async(*bucket.comm, bucket.buffer, bucket.wire,
                         gradient_division(bucket.comm->size(), wire_));
  }

 private:
  std::optional<at::ScalarType> wire_;
};

}  // namespace
}  // namespace detail

std::shared_ptr<CommHook> make_all_reduce_hook(std::optional<at::ScalarType> wire_dtype) {
  return std::make_shared<detail::AllReduceHook>(wire_dtype);
}

}  // namespace mpiaccel
