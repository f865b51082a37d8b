#pragma once
// Torch dtypes ⇄ HDF5 file types. Memory type = file type for every dtype
// (the host is little-endian, so bytes go to disk unconverted and come back
// bit-exact). bfloat16 and float16 are HDF5 float types built bit by bit, so
// h5dump and h5py show real values.

#include <c10/core/ScalarType.h>
#include <hdf5.h>

#include <string>

#include "runtime/h5_handle.hpp"

namespace mpiaccel::detail {

/// Where the bfloat16 type is committed in a checkpoint file.
inline constexpr const char* kBfloat16TypePath = "/types/bfloat16";

/// True for the dtypes a checkpoint stores.
bool checkpoint_dtype_supported(at::ScalarType dtype);
/// Parses a torch_dtype attribute ("float32", ...); false if unknown.
bool parse_checkpoint_dtype(const std::string& name, at::ScalarType* dtype);

/// A new (transient) HDF5 type for `dtype`. For bfloat16 use bfloat16_type().
H5Id make_file_type(at::ScalarType dtype);
/// IEEE-style bfloat16: copy of F32LE with sign 15, exponent 7..14, mantissa 0..6, bias 127.
H5Id make_bfloat16_type();
/// IEEE binary16: sign 15, exponent 10..14, mantissa 0..9, bias 15 (1.10 has no H5T_IEEE_F16LE).
H5Id make_float16_type();

/// Empty if the dataset type `type` can hold `dtype` bit-exact (same class,
/// size and byte order), else why not.
std::string file_type_mismatch(hid_t type, at::ScalarType dtype);

}  // namespace mpiaccel::detail
