#pragma once
// Freeing and refilling a full parameter's memory without touching the
// parameter tensor itself (FSDP1's trick, through public c10 API).
//
// Autograd's saved tensors (a Linear's weight saved for its backward, the
// transposed view a tied head saves) hold the parameter's TensorImpl or views
// sharing its StorageImpl. So a unit is resharded by emptying that StorageImpl
// (data pointer null, 0 bytes) and gathered by giving it fresh memory from its
// own allocator: every alias sees the data again, and shapes stay as they were.
// The gathered values are written through a separate tensor aliasing the
// storage, so the parameter's version counter does not move and autograd does
// not report an in-place modification of a saved tensor.
//
// While a parameter's storage is empty, reading it is undefined (a null data
// pointer): only FSDP's own code touches the full parameters of a sharded
// unit. Verified with LibTorch 1.13 (tests/mpi/test_fsdp.cpp trains through it).

#include <ATen/core/Tensor.h>

namespace mpiaccel::detail {

/// True when `param` is contiguous and alone in a storage of exactly its bytes
/// (so freeing that storage frees nothing else).
bool owns_whole_storage(const at::Tensor& param);
/// Whether `param`'s storage currently holds memory.
bool storage_allocated(const at::Tensor& param);
/// Releases `param`'s memory (its storage becomes 0 bytes). No-op if empty.
void free_storage(const at::Tensor& param);
/// Gives `param`'s storage memory again (if empty) and returns a tensor that
/// aliases it with `param`'s shape but its own version counter, to write into.
at::Tensor allocate_storage(const at::Tensor& param);

}  // namespace mpiaccel::detail
