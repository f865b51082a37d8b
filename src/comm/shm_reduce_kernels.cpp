#include "comm/shm_reduce_kernels.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// Elements per block: the accumulator (8 KiB of float) stays in L1 while
// every source streams through it once, so the adds vectorise and each
// source is read exactly once.
constexpr int64_t kBlock = 2048;

template <typename T> struct Accumulator { using type = float; };
template <> struct Accumulator<double> { using type = double; };

template <typename T, typename Op>
void reduce_typed(const std::vector<void*>& outs, const std::vector<const void*>& sources,
                  int64_t count, Op combine, bool average) {
  using Acc = typename Accumulator<T>::type;
  const auto parts = static_cast<Acc>(sources.size());
  alignas(64) Acc acc[kBlock];
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const T* first = static_cast<const T*>(sources[0]) + begin;
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(first[i]);
    for (size_t k = 1; k < sources.size(); ++k) {
      const T* source = static_cast<const T*>(sources[k]) + begin;
      for (int64_t i = 0; i < n; ++i) acc[i] = combine(acc[i], static_cast<Acc>(source[i]));
    }
    if (average)
      for (int64_t i = 0; i < n; ++i) acc[i] /= parts;
    // Converted once, into the first output; the block is then in L1, and
    // the other outputs are plain copies of it.
    T* first_out = static_cast<T*>(outs[0]) + begin;
    for (int64_t i = 0; i < n; ++i) first_out[i] = static_cast<T>(acc[i]);
    for (size_t j = 1; j < outs.size(); ++j)
      std::memcpy(static_cast<T*>(outs[j]) + begin, first_out, static_cast<size_t>(n) * sizeof(T));
  }
}

template <typename T>
void reduce_with_op(const std::vector<void*>& target, const std::vector<const void*>& sources,
                    int64_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return reduce_typed<T>(target, sources, count, [](auto a, auto b) { return a + b; },
                          op == ReduceOp::Avg);
    case ReduceOp::Max:
      return reduce_typed<T>(target, sources, count, [](auto a, auto b) { return b > a ? b : a; },
                          false);
    case ReduceOp::Min:
      return reduce_typed<T>(target, sources, count, [](auto a, auto b) { return b < a ? b : a; },
                          false);
  }
}

}  // namespace

bool reduce_elementwise_supports(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kBFloat16 ||
         dtype == at::kHalf;
}

void reduce_elementwise(const std::vector<void*>& outs, const std::vector<const void*>& sources,
                        int64_t count, at::ScalarType dtype, ReduceOp op) {
  MPIACCEL_CHECK(!sources.empty() && !outs.empty(), "reduce_elementwise: no sources or outputs");
  switch (dtype) {
    case at::kFloat: return reduce_with_op<float>(outs, sources, count, op);
    case at::kDouble: return reduce_with_op<double>(outs, sources, count, op);
    case at::kBFloat16: return reduce_with_op<c10::BFloat16>(outs, sources, count, op);
    case at::kHalf: return reduce_with_op<c10::Half>(outs, sources, count, op);
    default:
      MPIACCEL_THROW(std::string("reduce_elementwise: unsupported dtype ") + c10::toString(dtype));
  }
}

}  // namespace mpiaccel::detail
