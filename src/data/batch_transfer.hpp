#pragma once
// A host batch on its way to the device: page-locked, then copied, either
// synchronously or on a side stream ordered by an event (loader.hpp,
// LoaderOptions). Written once through runtime/device_streams.hpp: on the CPU
// nothing here does anything.

#include <c10/core/Device.h>

#include "mpiaccel/loader.hpp"

namespace mpiaccel::detail {

/// `batch` in page-locked host memory (a target that is the input stays the
/// same tensor). Needs a CUDA LibTorch.
Batch pinned(const Batch& batch);

/// `batch` on `device`. With `non_blocking` the copy is queued on a side
/// stream and the calling thread's current stream waits for it by an event:
/// the host goes on at once, and the copy overlaps the compute still queued.
/// Otherwise the copy is done when this returns.
Batch to_device(const Batch& batch, const at::Device& device, bool non_blocking);

}  // namespace mpiaccel::detail
