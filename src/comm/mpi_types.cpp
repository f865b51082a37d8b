#include "comm/mpi_types.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "mpiaccel/error.hpp"
#include "runtime/check_mpi.hpp"

namespace mpiaccel::detail {
namespace {

// Created once and never freed: MPI_Finalize releases them, and freeing them
// earlier would race with communicators still alive in other threads.
MPI_Datatype two_bytes = MPI_DATATYPE_NULL;
MPI_Op half_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};      // sum, max, min
MPI_Op bfloat16_ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum, max, min
std::once_flag init_once;

struct Plus {
  float operator()(float a, float b) const { return a + b; }
};
struct Larger {
  float operator()(float a, float b) const { return std::max(a, b); }
};
struct Smaller {
  float operator()(float a, float b) const { return std::min(a, b); }
};

// MPI_User_function: inout[i] = in[i] ∘ inout[i], computed in float and
// rounded once to 16 bits (round to nearest even), which is what a reduction
// in the 16-bit type itself gives.
template <typename T, typename F>
void reduce_16(void* in, void* inout, int* length, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  const F f;
  for (int i = 0; i < *length; ++i)
    b[i] = T(f(static_cast<float>(a[i]), static_cast<float>(b[i])));
}

// bf16 sum, the gradient all-reduce of mixed precision: the same arithmetic
// as reduce_16<c10::BFloat16, Plus> (widen, add in float, round to nearest
// even, NaN -> 0x7FC0), written on the bit patterns without branches so the
// compiler vectorises it; the generic loop runs ~10x slower and would cost
// more than the bytes bf16 saves.
void sum_bfloat16(void* in, void* inout, int* length, MPI_Datatype*) {
  const uint16_t* a = static_cast<const uint16_t*>(in);
  uint16_t* b = static_cast<uint16_t*>(inout);
  const int n = *length;
  for (int i = 0; i < n; ++i) {
    const uint32_t ua = uint32_t{a[i]} << 16, ub = uint32_t{b[i]} << 16;
    float fa, fb;
    std::memcpy(&fa, &ua, sizeof fa);
    std::memcpy(&fb, &ub, sizeof fb);
    const float sum = fa + fb;
    uint32_t us;
    std::memcpy(&us, &sum, sizeof us);
    const uint32_t rounded = (us + 0x7FFFu + ((us >> 16) & 1u)) >> 16;
    b[i] = (us & 0x7FFFFFFFu) > 0x7F800000u ? uint16_t{0x7FC0} : static_cast<uint16_t>(rounded);
  }
}

void create() {
  MPIACCEL_CHECK_MPI(MPI_Type_contiguous(2, MPI_BYTE, &two_bytes));
  MPIACCEL_CHECK_MPI(MPI_Type_commit(&two_bytes));
  MPIACCEL_CHECK_MPI(MPI_Op_create(&reduce_16<c10::Half, Plus>, 1, &half_ops[0]));
  MPIACCEL_CHECK_MPI(MPI_Op_create(&reduce_16<c10::Half, Larger>, 1, &half_ops[1]));
  MPIACCEL_CHECK_MPI(MPI_Op_create(&reduce_16<c10::Half, Smaller>, 1, &half_ops[2]));
  MPIACCEL_CHECK_MPI(MPI_Op_create(&sum_bfloat16, 1, &bfloat16_ops[0]));
  MPIACCEL_CHECK_MPI(MPI_Op_create(&reduce_16<c10::BFloat16, Larger>, 1, &bfloat16_ops[1]));
  MPIACCEL_CHECK_MPI(MPI_Op_create(&reduce_16<c10::BFloat16, Smaller>, 1, &bfloat16_ops[2]));
}

int op_index(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return 0;
    case ReduceOp::Max: return 1;
    case ReduceOp::Min: return 2;
  }
  MPIACCEL_THROW("unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

}  // namespace

void init_mpi_types() { std::call_once(init_once, create); }

MPI_Datatype mpi_datatype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kHalf:
    case at::kBFloat16: init_mpi_types(); return two_bytes;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    default: break;
  }
  MPIACCEL_THROW(std::string("dtype ") + c10::toString(dtype) + " has no MPI mapping");
}

MPI_Op mpi_reduce_op(ReduceOp op, at::ScalarType dtype) {
  const int index = op_index(op);
  if (dtype == at::kHalf || dtype == at::kBFloat16) {
    init_mpi_types();
    return dtype == at::kHalf ? half_ops[index] : bfloat16_ops[index];
  }
  const MPI_Op builtin[3] = {MPI_SUM, MPI_MAX, MPI_MIN};
  return builtin[index];
}

}  // namespace mpiaccel::detail
