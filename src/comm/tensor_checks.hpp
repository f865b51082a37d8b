#pragma once
// Internal: argument checks shared by the communicators. Each throws
// mpiaccel::Error naming the op, the argument and what to do, before anything
// is enqueued, so a bad call never leaves a collective half-issued.

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

/// Throws unless `tensor` is defined, contiguous, of a supported dtype and on
/// the communicator's device (`want_cuda`).
void check_tensor(const at::Tensor& tensor, const char* op, const char* argument,
                  bool want_cuda, const std::string& backend);

/// Throws unless `a` and `b` have the same dtype.
void check_same_dtype(const at::Tensor& a, const at::Tensor& b, const char* op);

/// Throws unless `tensor` has `expected` elements.
void check_numel(const at::Tensor& tensor, int64_t expected, const char* op,
                 const char* argument, const std::string& rule);

/// Avg of integers would need a rounding rule of its own: refuse it.
void check_reduce_op(ReduceOp op, at::ScalarType dtype, const char* op_name);

/// Throws unless `root` is a rank of a communicator of `size` ranks.
void check_root(int root, int size, const char* op);

/// Validates `counts` for all_gather_uneven and returns its sum.
int64_t check_uneven_counts(const std::vector<int64_t>& counts, int size, int rank,
                            const at::Tensor& output, const at::Tensor& input);

/// "all_reduce of 4194304 bytes (float32)": the op as logs and the deadline
/// message name it.
std::string describe_op(const char* op, const at::Tensor& tensor);
std::string describe_op(const char* op, int64_t bytes, const char* dtype);

/// "5 s", "2.5 s", "300 ms".
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace mpiaccel::detail
