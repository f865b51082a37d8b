#pragma once
// MPIACCEL_CHECK_CUDA / MPIACCEL_CHECK_NCCL: throw mpiaccel::Error with the
// library's own message. Only for translation units built with CUDA + NCCL.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "mpiaccel/error.hpp"

#define MPIACCEL_CHECK_CUDA(call)                                                         \
  do {                                                                                    \
    cudaError_t mpiaccel_err_ = (call);                                                   \
    if (mpiaccel_err_ != cudaSuccess)                                                     \
      ::mpiaccel::detail::throw_error(std::string(#call) + " failed: " +                  \
                                          cudaGetErrorString(mpiaccel_err_),              \
                                      __FILE__, __LINE__);                                \
  } while (0)

#define MPIACCEL_CHECK_NCCL(call)                                                         \
  do {                                                                                    \
    ncclResult_t mpiaccel_res_ = (call);                                                  \
    if (mpiaccel_res_ != ncclSuccess && mpiaccel_res_ != ncclInProgress)                  \
      ::mpiaccel::detail::throw_error(std::string(#call) + " failed: " +                  \
                                          ncclGetErrorString(mpiaccel_res_),              \
                                      __FILE__, __LINE__);                                \
  } while (0)
