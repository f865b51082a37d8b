#pragma once
// The whole public API of mpiaccel. Include this and LibTorch; nothing here
// exposes MPI, NCCL, CUDA or HDF5 types. (The build checks that every header
// of include/mpiaccel/ is reached from here: cmake/check_modules.py.)

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/activation_checkpointing.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/estimate.hpp"
#include "mpiaccel/fsdp.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/optim.hpp"
#include "mpiaccel/precision.hpp"
#include "mpiaccel/program.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/state.hpp"
#include "mpiaccel/strategy.hpp"
#include "mpiaccel/trainer.hpp"
#include "mpiaccel/unit.hpp"
#include "mpiaccel/version.hpp"
#include "mpiaccel/zero.hpp"
