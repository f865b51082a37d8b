#pragma once
// The whole public API of mpiaccel. Include this and LibTorch; nothing here
// exposes MPI, NCCL, CUDA or HDF5 types.

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/data.hpp"
#include "mpiaccel/ddp.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/models.hpp"
#include "mpiaccel/program.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/state.hpp"
#include "mpiaccel/strategy.hpp"
#include "mpiaccel/trainer.hpp"
#include "mpiaccel/unit.hpp"
#include "mpiaccel/version.hpp"
