// Emptying and refilling parameter storages (see param_storage.hpp).

#include "fsdp/param_storage.hpp"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

size_t param_bytes(const at::Tensor& param) {
  return static_cast<size_t>(param.numel()) * param.element_size();
}

}  // namespace

bool owns_whole_storage(const at::Tensor& param) {
  return param.has_storage() && param.is_contiguous() && param.storage_offset() == 0 &&
         param.storage().nbytes() == param_bytes(param);
}

bool storage_allocated(const at::Tensor& param) {
  return param.storage().data() != nullptr || param_bytes(param) == 0;
}

void free_storage(const at::Tensor& param) {
  c10::StorageImpl* storage = param.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == 0) return;
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, param.device()));
  storage->set_nbytes(0);
}

at::Tensor allocate_storage(const at::Tensor& param) {
  c10::StorageImpl* storage = param.storage().unsafeGetStorageImpl();
  const size_t bytes = param_bytes(param);
  if (storage->nbytes() != bytes) {
    MPIACCEL_CHECK(storage->allocator() != nullptr,
                   "FSDP: a parameter's storage has no allocator to refill it from");
    storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
    storage->set_nbytes(bytes);
  }
  at::Tensor alias = at::empty({0}, param.options().requires_grad(false));
  alias.set_(param.storage(), 0, param.sizes(), param.strides());
  return alias;
}

}  // namespace mpiaccel::detail
