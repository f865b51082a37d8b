// ctest: links mpiaccel; timeout 60
// The communicators' argument checks and op descriptions, which run before
// anything reaches MPI or NCCL (no MPI needed here).
#define BOOST_TEST_MODULE comm_checks
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <string>

#include "comm/tensor_checks.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"

using namespace mpiaccel::detail;

namespace {

template <typename F>
std::string error_of(F&& body) {
  try {
    body();
  } catch (const mpiaccel::Error& e) {
    return e.message();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(op_description_names_bytes_and_dtype) {
  BOOST_TEST(describe_op("all_reduce", at::zeros({1 << 20}, at::kFloat)) ==
             "all_reduce of 4194304 bytes (float32)");
  BOOST_TEST(describe_op("broadcast", at::zeros({3}, at::kBFloat16)) ==
             "broadcast of 6 bytes (bfloat16)");
  BOOST_TEST(format_duration(std::chrono::milliseconds(5000)) == "5 s");
  BOOST_TEST(format_duration(std::chrono::milliseconds(2500)) == "2.5 s");
  BOOST_TEST(format_duration(std::chrono::milliseconds(300)) == "300 ms");
  BOOST_TEST(std::string(mpiaccel::reduce_op_name(mpiaccel::ReduceOp::Avg)) == "avg");
}

BOOST_AUTO_TEST_CASE(every_supported_dtype_has_a_name_and_others_are_refused) {
  for (auto t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kByte})
    BOOST_TEST(error_of([&] { check_tensor(at::zeros({2}, t), "op", "x", false, "MPI"); }).empty());
  for (auto t : {at::kBool, at::kShort, at::kChar, at::kComplexFloat})
    BOOST_TEST(error_of([&] { check_tensor(at::zeros({2}, t), "op", "x", false, "MPI"); })
                   .find("supported: float32, float64, float16, bfloat16") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(messages_say_what_is_wrong_and_what_to_do) {
  const std::string strided =
      error_of([] { check_tensor(at::zeros({4, 6}).t(), "all_reduce", "tensor", false, "MPI"); });
  BOOST_TEST(strided.find("all_reduce: `tensor` is not contiguous (sizes [6, 4], strides [1, 6])") == 0);
  BOOST_TEST(strided.find("tensor.contiguous()") != std::string::npos);
  const std::string device =
      error_of([] { check_tensor(at::zeros({4}), "broadcast", "tensor", true, "NCCL"); });
  BOOST_TEST(device.find("is on cpu but the NCCL communicator works on CUDA tensors") !=
             std::string::npos);
  BOOST_TEST(error_of([] { check_reduce_op(mpiaccel::ReduceOp::Avg, at::kLong, "all_reduce"); })
                 .find("all_reduce: Avg of int64 is not supported") == 0);
  BOOST_TEST(error_of([] { check_reduce_op(mpiaccel::ReduceOp::Max, at::kLong, "x"); }).empty());
  BOOST_TEST(error_of([] { check_root(-1, 4, "broadcast"); }) ==
             "broadcast: root -1 is not a rank of this communicator (size 4)");
}

BOOST_AUTO_TEST_CASE(uneven_counts_are_validated) {
  const at::Tensor out = at::zeros({6}), in = at::zeros({2});
  BOOST_TEST(check_uneven_counts({1, 2, 3}, 3, 1, out, in) == 6);
  BOOST_TEST(error_of([&] { check_uneven_counts({1, 2}, 3, 1, out, in); })
                 .find("`counts` has 2 entries but the communicator has 3 ranks") != std::string::npos);
  BOOST_TEST(error_of([&] { check_uneven_counts({4, -1, 3}, 3, 0, out, at::zeros({4})); })
                 .find("counts[1] = -1 is negative") != std::string::npos);
  BOOST_TEST(error_of([&] { check_uneven_counts({1, 2, 4}, 3, 1, out, in); })
                 .find("`output` has 6 elements but needs 7") != std::string::npos);
}
