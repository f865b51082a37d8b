// The bf16/f16 layouts follow IEEE 754 bit positions within a 16-bit little-endian
// word; HDF5 converts them to and from any native float type for outside
// readers, while our own reads use the file type as the memory type.

#include "checkpoint/hdf5/h5_types.hpp"

#include "mpiaccel/checkpoint.hpp"
#include "runtime/check_hdf5.hpp"
#include "core/dtype_names.hpp"

namespace mpiaccel {

std::string checkpoint_dtype_name(at::ScalarType dtype) { return dtype_name(dtype); }

namespace detail {
namespace {

H5Id copy_type(hid_t base) { return H5Id(MPIACCEL_CHECK_HDF5(H5Tcopy(base))); }

H5Id make_half_like(int exponent_bits, int mantissa_bits, size_t bias) {
  H5Id type = copy_type(H5T_IEEE_F32LE);
  // Shrink in this order: fields first (they must fit the precision), then
  // precision, then size.
  MPIACCEL_CHECK_HDF5(H5Tset_fields(type, 15, mantissa_bits, exponent_bits, 0, mantissa_bits));
  MPIACCEL_CHECK_HDF5(H5Tset_offset(type, 0));
  MPIACCEL_CHECK_HDF5(H5Tset_precision(type, 16));
  MPIACCEL_CHECK_HDF5(H5Tset_size(type, 2));
  MPIACCEL_CHECK_HDF5(H5Tset_ebias(type, bias));
  return type;
}

}  // namespace

bool checkpoint_dtype_supported(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16:
    case at::kLong: case at::kInt: case at::kShort: case at::kChar: case at::kByte:
    case at::kBool:
      return true;
    default:
      return false;
  }
}

bool parse_checkpoint_dtype(const std::string& name, at::ScalarType* dtype) {
  const auto found = dtype_from_name(name);
  if (found) *dtype = *found;
  return found.has_value();
}

H5Id make_bfloat16_type() { return make_half_like(8, 7, 127); }
H5Id make_float16_type() { return make_half_like(5, 10, 15); }

H5Id make_file_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return copy_type(H5T_IEEE_F32LE);
    case at::kDouble: return copy_type(H5T_IEEE_F64LE);
    case at::kHalf: return make_float16_type();
    case at::kBFloat16: return make_bfloat16_type();
    case at::kLong: return copy_type(H5T_STD_I64LE);
    case at::kInt: return copy_type(H5T_STD_I32LE);
    case at::kShort: return copy_type(H5T_STD_I16LE);
    case at::kChar: return copy_type(H5T_STD_I8LE);
    case at::kByte: return copy_type(H5T_STD_U8LE);
    case at::kBool: {
      // h5py's own bool: an int8 enum FALSE=0, TRUE=1, so Python reads numpy bool.
      H5Id type(MPIACCEL_CHECK_HDF5(H5Tenum_create(H5T_NATIVE_INT8)));
      int8_t no = 0, yes = 1;
      MPIACCEL_CHECK_HDF5(H5Tenum_insert(type, "FALSE", &no));
      MPIACCEL_CHECK_HDF5(H5Tenum_insert(type, "TRUE", &yes));
      return type;
    }
    default:
      MPIACCEL_THROW("checkpoint: dtype " + dtype_name(dtype) +
                     " is not supported (float32/64/16, bfloat16, int64/32/16/8, uint8, bool)");
  }
}

std::string file_type_mismatch(hid_t type, at::ScalarType dtype) {
  const size_t want_size = c10::elementSize(dtype);
  const size_t size = H5Tget_size(type);
  if (size != want_size)
    return "element size " + std::to_string(size) + " bytes, " + dtype_name(dtype) + " needs " +
           std::to_string(want_size);
  const H5T_class_t cls = H5Tget_class(type);
  const bool is_float = at::isFloatingType(dtype);
  if (dtype == at::kBool) {
    if (cls != H5T_ENUM && cls != H5T_INTEGER) return "HDF5 type is not an integer or enum";
  } else if (is_float ? cls != H5T_FLOAT : cls != H5T_INTEGER) {
    return std::string("HDF5 type class is not ") + (is_float ? "float" : "integer");
  }
  if (size > 1 && H5Tget_order(type) != H5T_ORDER_LE) return "byte order is not little-endian";
  if (is_float) {
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    H5Id want = make_file_type(dtype);
    size_t ws = 0, we = 0, wes = 0, wm = 0, wms = 0;
    H5Tget_fields(want, &ws, &we, &wes, &wm, &wms);
    if (spos != ws || epos != we || esize != wes || mpos != wm || msize != wms ||
        H5Tget_ebias(type) != H5Tget_ebias(want))
      return "float bit layout differs from " + dtype_name(dtype);
  } else if (dtype != at::kBool) {
    const bool is_signed = dtype != at::kByte;
    if ((H5Tget_sign(type) == H5T_SGN_2) != is_signed) return "signedness differs";
  }
  return "";
}

}  // namespace detail
}  // namespace mpiaccel
