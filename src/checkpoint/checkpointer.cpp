#include <filesystem>
#include <utility>

#include "checkpoint/save/async_save.hpp"
#include "checkpoint/checkpoint_impl.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/mpi_handle.hpp"
#include "checkpoint/save/commit.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"
#include "checkpoint/io/file_comm.hpp"

namespace mpiaccel {

Checkpointer::Checkpointer(std::shared_ptr<Communicator> comm, std::string dir, int64_t keep_last)
    : comm_(std::move(comm)), dir_(std::move(dir)), keep_last_(keep_last) {
  MPIACCEL_CHECK(comm_ != nullptr, "Checkpointer: no communicator");
  MPIACCEL_CHECK(!dir_.empty(), "Checkpointer: empty checkpoint directory");
  file_comm_ = std::make_shared<detail::FileComm>(*comm_);
  writer_comm_ = detail::MpiCommunicator::duplicate(detail::mpi_comm_of(*comm_), comm_->timeout());
  async_ = std::make_shared<detail::AsyncSave>(comm_);
}

Checkpointer::~Checkpointer() {
  async_.reset();  // its writer uses the members below: joined first
}

std::string Checkpointer::save(const ShardedStateDict& state, int64_t step,
                               const CheckpointMeta& meta) {
  wait();
  return detail::save_checkpoint(file_comm_->comm, *comm_, dir_, keep_last_,
                                 state, step, meta);
}

std::string Checkpointer::save_async(const ShardedStateDict& state, int64_t step,
                                     const CheckpointMeta& meta) {
  wait();
  async_->start(state, step, meta,
                [this](const ShardedStateDict& staged, int64_t at, const CheckpointMeta& m) {
                  return detail::save_checkpoint(file_comm_->comm, *writer_comm_, dir_,
                                                 keep_last_, staged, at, m);
                });
  return detail::join_path(dir_, detail::checkpoint_file_name(step));
}

bool Checkpointer::poll() { return async_->poll(); }

void Checkpointer::wait() { async_->wait(); }

bool Checkpointer::saving() const { return async_->in_flight(); }

CheckpointMeta Checkpointer::load(const std::string& path_or_dir, ShardedStateDict& targets) {
  wait();  // one HDF5 thread at a time
  return detail::load_checkpoint(file_comm_->comm, *comm_, path_or_dir,
                                 targets);
}

std::string Checkpointer::latest_source() {
  int64_t found = 0;
  if (comm_->rank() == 0) found = std::filesystem::exists(std::filesystem::path(dir_) / "latest") ? 1 : 0;
  found = comm_->all_reduce_int(found, ReduceOp::Max);
  return found ? dir_ : "";
}

std::string Checkpointer::resolve(const std::string& path_or_dir) {
  return detail::resolve_checkpoint(path_or_dir);
}

std::vector<std::string> Checkpointer::list(const std::string& dir) {
  return detail::list_checkpoints(dir);
}

}  // namespace mpiaccel
