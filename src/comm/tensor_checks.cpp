#include "comm/tensor_checks.hpp"

#include <sstream>

#include "core/dtype_names.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

constexpr const char* kSupported = "float32, float64, float16, bfloat16, int32, int64, uint8";

std::string shape_text(const at::Tensor& tensor) {
  std::ostringstream out;
  out << "sizes " << tensor.sizes() << ", strides " << tensor.strides();
  return out.str();
}

}  // namespace

bool communicable(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kInt:
    case at::kLong:
    case at::kByte:
      return true;
    default:
      return false;
  }
}

void check_tensor(const at::Tensor& tensor, const char* op, const char* argument,
                  bool want_cuda, const std::string& backend) {
  // Built only on failure: this runs on every collective call.
  const auto where = [&] { return std::string(op) + ": `" + argument + "`"; };
  MPIACCEL_CHECK(tensor.defined(), where() + " is an undefined tensor; pass an allocated tensor");
  MPIACCEL_CHECK(communicable(tensor.scalar_type()),
                 where() + " has dtype " + c10::toString(tensor.scalar_type()) +
                     ", which the communicators do not move; supported: " + kSupported +
                     " (convert with .to())");
  MPIACCEL_CHECK(tensor.is_contiguous(),
                 where() + " is not contiguous (" + shape_text(tensor) +
                     "); pass tensor.contiguous() and copy the result back");
  const bool right_device = want_cuda ? tensor.device().is_cuda() : tensor.device().is_cpu();
  MPIACCEL_CHECK(right_device,
                 where() + " is on " + tensor.device().str() + " but the " + backend +
                     " communicator works on " + (want_cuda ? "CUDA" : "CPU") +
                     " tensors; move it with .to() or use the " +
                     (want_cuda ? "MPI" : "NCCL") + " communicator ([distributed] backend)");
}

void check_same_dtype(const at::Tensor& a, const at::Tensor& b, const char* op) {
  MPIACCEL_CHECK(a.scalar_type() == b.scalar_type(),
                 std::string(op) + ": `output` is " + dtype_name(a.scalar_type()) +
                     " but `input` is " + dtype_name(b.scalar_type()) +
                     "; both must have the same dtype");
}

void check_numel(const at::Tensor& tensor, int64_t expected, const char* op,
                 const char* argument, const std::string& rule) {
  MPIACCEL_CHECK(tensor.numel() == expected,
                 std::string(op) + ": `" + argument + "` has " + std::to_string(tensor.numel()) +
                     " elements but needs " + std::to_string(expected) + " (" + rule + ")");
}

void check_reduce_op(ReduceOp op, at::ScalarType dtype, const char* op_name) {
  const bool floating = dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf ||
                        dtype == at::kBFloat16;
  MPIACCEL_CHECK(op != ReduceOp::Avg || floating,
                 std::string(op_name) + ": Avg of " + dtype_name(dtype) +
                     " is not supported (integer division would round); use Sum and "
                     "divide, or reduce a floating-point tensor");
}

void check_root(int root, int size, const char* op) {
  MPIACCEL_CHECK(root >= 0 && root < size,
                 std::string(op) + ": root " + std::to_string(root) +
                     " is not a rank of this communicator (size " + std::to_string(size) + ")");
}

int64_t check_uneven_counts(const std::vector<int64_t>& counts, int size, int rank,
                            const at::Tensor& output, const at::Tensor& input) {
  const char* op = "all_gather_uneven";
  MPIACCEL_CHECK(static_cast<int>(counts.size()) == size,
                 std::string(op) + ": `counts` has " + std::to_string(counts.size()) +
                     " entries but the communicator has " + std::to_string(size) +
                     " ranks; pass one count per rank, the same on every rank");
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    MPIACCEL_CHECK(counts[r] >= 0, std::string(op) + ": counts[" + std::to_string(r) + "] = " +
                                       std::to_string(counts[r]) + " is negative");
    total += counts[r];
  }
  check_numel(input, counts[static_cast<size_t>(rank)], op, "input", "counts[rank]");
  check_numel(output, total, op, "output", "the sum of counts");
  return total;
}

std::string describe_op(const char* op, int64_t bytes, const char* dtype) {
  return std::string(op) + " of " + std::to_string(bytes) + " bytes (" + dtype + ")";
}

std::string describe_op(const char* op, const at::Tensor& tensor) {
  return describe_op(op, static_cast<int64_t>(tensor.nbytes()), dtype_name(tensor.scalar_type()).c_str());
}

std::string format_duration(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  std::ostringstream out;
  out << static_cast<double>(ms) / 1000.0 << " s";
  return out.str();
}

}  // namespace mpiaccel::detail
