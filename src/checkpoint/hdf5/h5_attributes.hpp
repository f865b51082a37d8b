#pragma once
// Scalar attributes and text datasets. Strings are fixed-length, NUL-padded
// UTF-8: parallel HDF5 1.10 cannot write variable-length data collectively, and
// h5py, h5ls and h5dump read fixed-length strings as they are. In a file opened
// with the MPI-IO driver every writer here is collective (same arguments on
// every rank); readers are independent.

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/h5_handle.hpp"

namespace mpiaccel::detail {

/// Values longer than this go to a dataset, not an attribute: attributes over
/// 64 KiB fail with HDF5's default object-header bounds.
inline constexpr size_t kMaxAttributeText = 32 * 1024;

/// A fixed-length string type of `length` bytes (at least 1).
H5Id string_type(size_t length);

void write_string_attribute(hid_t loc, const std::string& name, const std::string& value);
void write_int_attribute(hid_t loc, const std::string& name, int64_t value);
/// False if `loc` has no attribute `name`; throws if it is not a string.
bool read_string_attribute(hid_t loc, const std::string& name, std::string* value);
/// False if missing; throws if it is not an integer.
bool read_int_attribute(hid_t loc, const std::string& name, int64_t* value);
/// Every attribute of `loc` read as text (integers printed in decimal).
std::map<std::string, std::string> read_attributes_as_text(hid_t loc);

/// Creates scalar string dataset `name` under `loc` holding `text`; only ranks
/// with `writer` contribute the bytes (every rank calls it, collectively, with
/// the same text length). `dxpl` is the transfer list (collective in parallel).
void write_text_dataset(hid_t loc, const std::string& name, const std::string& text, bool writer,
                        hid_t dxpl);
/// The text of a scalar string dataset (trailing NULs removed).
std::string read_text_dataset(hid_t loc, const std::string& name);

/// True if `path` (absolute, e.g. "/meta/config") names an object in `file`.
bool object_exists(hid_t file, const std::string& path);

}  // namespace mpiaccel::detail
