#include "comm/shm_block.hpp"

#include <ATen/ops/from_blob.h>
#include <sys/mman.h>

#include "mpiaccel/error.hpp"


namespace mpiaccel::detail {

std::shared_ptr<ShmBlock> ShmBlock::create(int rank, int64_t bytes,
                                           const ShmSetupCollectives& collectives,
                                           std::string* why) {
  const std::string token = agree_on_segment_token(rank, bytes, collectives, "allocate_node_shared");
  std::shared_ptr<ShmBlock> block(new ShmBlock());
  block->bytes_ = round_up_to_pages(bytes);
  const std::string name = shm_segment_name(token, 0);
  if (rank == 0) block->mapping_ = map_shm_segment(name, block->bytes_, true, why);
  if (!collectives.all_true(rank != 0 || block->mapping_ != nullptr)) return nullptr;
  if (rank != 0) block->mapping_ = map_shm_segment(name, block->bytes_, false, why);
  const bool ok = collectives.all_true(block->mapping_ != nullptr);
  if (rank == 0) ::shm_unlink(name.c_str());  // every rank has opened it (or failed to) by now
  return ok ? block : nullptr;
}

ShmBlock::~ShmBlock() {
  if (mapping_) ::munmap(mapping_, static_cast<size_t>(bytes_));
}

at::Tensor ShmBlock::tensor(const std::shared_ptr<ShmBlock>& self) const {
  MPIACCEL_CHECK(self.get() == this, "ShmBlock::tensor: `self` must own this block");
  return at::from_blob(mapping_, {bytes_}, [keep = self](void*) {},
                       at::TensorOptions().dtype(at::kByte));
}

}  // namespace mpiaccel::detail
