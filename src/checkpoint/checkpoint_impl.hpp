#pragma once
// The collective save and load behind Checkpointer (checkpoint_save.cpp,
// checkpoint_load.cpp). `world` is the MPI communicator the file is opened
// over; `comm` (over the same ranks) agrees on errors.

#include <mpi.h>

#include <string>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"

namespace mpiaccel::detail {

std::string save_checkpoint(MPI_Comm world, Communicator& comm, const std::string& dir,
                            int64_t keep_last, const ShardedStateDict& state, int64_t step,
                            const CheckpointMeta& meta);

CheckpointMeta load_checkpoint(MPI_Comm world, Communicator& comm, const std::string& path_or_dir,
                               ShardedStateDict& targets);

}  // namespace mpiaccel::detail
