#include "checkpoint/hdf5/h5_attributes.hpp"

#include <sstream>

#include "runtime/check_hdf5.hpp"

namespace mpiaccel::detail {
namespace {

// The largest text value read (a config, an RNG blob list): beyond it a file lies.
constexpr size_t kMaxTextBytes = size_t{256} << 20;

// "/model/w" for an object, "attribute 'step' of /" for an attribute.
std::string describe(hid_t obj, bool is_attribute) {
  char name[512] = {0};
  if (!is_attribute) {
    H5Iget_name(obj, name, sizeof name);
    return std::string("dataset ") + name;
  }
  char attribute[256] = {0};
  H5Aget_name(obj, sizeof attribute, attribute);
  H5Iget_name(obj, name, sizeof name);
  return std::string("attribute '") + attribute + "' of " + name;
}

// A file may give any value any dataspace and any string length: every value
// read here is one element, and a string is at most kMaxTextBytes, or the
// read is refused before a byte lands in a buffer sized for one.
void check_single_value(hid_t obj, hid_t type, bool is_attribute) {
  H5Id space(MPIACCEL_CHECK_HDF5(is_attribute ? H5Aget_space(obj) : H5Dget_space(obj)));
  const hssize_t points = H5Sget_simple_extent_npoints(space);
  MPIACCEL_CHECK(points == 1, describe(obj, is_attribute) + " holds " + std::to_string(points) +
                                  " values where one is expected (a damaged or hostile file)");
  MPIACCEL_CHECK(H5Tis_variable_str(type) > 0 || H5Tget_size(type) <= kMaxTextBytes,
                 describe(obj, is_attribute) + " claims a value of " +
                     std::to_string(H5Tget_size(type)) + " bytes (a damaged or hostile file)");
}

std::string read_string(hid_t obj, hid_t type, bool is_attribute) {
  check_single_value(obj, type, is_attribute);
  // Variable-length strings (files written by others) are read as such.
  if (H5Tis_variable_str(type) > 0) {
    H5Id mem(MPIACCEL_CHECK_HDF5(H5Tcopy(H5T_C_S1)));
    MPIACCEL_CHECK_HDF5(H5Tset_size(mem, H5T_VARIABLE));
    char* value = nullptr;
    if (is_attribute)
      MPIACCEL_CHECK_HDF5(H5Aread(obj, mem, &value));
    else
      MPIACCEL_CHECK_HDF5(H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value));
    std::string text = value ? value : "";
    H5free_memory(value);
    return text;
  }
  const size_t size = H5Tget_size(type);
  std::string text(size, '\0');
  if (is_attribute)
    MPIACCEL_CHECK_HDF5(H5Aread(obj, type, text.data()));
  else
    MPIACCEL_CHECK_HDF5(H5Dread(obj, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()));
  const auto end = text.find_last_not_of('\0');
  text.resize(end == std::string::npos ? 0 : end + 1);
  return text;
}

}  // namespace

H5Id string_type(size_t length) {
  H5Id type(MPIACCEL_CHECK_HDF5(H5Tcopy(H5T_C_S1)));
  MPIACCEL_CHECK_HDF5(H5Tset_size(type, length == 0 ? 1 : length));
  MPIACCEL_CHECK_HDF5(H5Tset_strpad(type, H5T_STR_NULLPAD));
  MPIACCEL_CHECK_HDF5(H5Tset_cset(type, H5T_CSET_UTF8));
  return type;
}

void write_string_attribute(hid_t loc, const std::string& name, const std::string& value) {
  H5Id type = string_type(value.size());
  H5Id space(MPIACCEL_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  H5Id attr(MPIACCEL_CHECK_HDF5(
      H5Acreate2(loc, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));  // collective
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  MPIACCEL_CHECK_HDF5(H5Awrite(attr, type, padded.data()));  // collective
}

void write_int_attribute(hid_t loc, const std::string& name, int64_t value) {
  H5Id space(MPIACCEL_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  H5Id attr(MPIACCEL_CHECK_HDF5(
      H5Acreate2(loc, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT)));  // collective
  MPIACCEL_CHECK_HDF5(H5Awrite(attr, H5T_NATIVE_INT64, &value));  // collective
}

bool read_string_attribute(hid_t loc, const std::string& name, std::string* value) {
  if (MPIACCEL_CHECK_HDF5(H5Aexists(loc, name.c_str())) == 0) return false;
  H5Id attr(MPIACCEL_CHECK_HDF5(H5Aopen(loc, name.c_str(), H5P_DEFAULT)));  // independent
  H5Id type(MPIACCEL_CHECK_HDF5(H5Aget_type(attr)));
  MPIACCEL_CHECK(H5Tget_class(type) == H5T_STRING, describe(attr, true) + " is not a string");
  *value = read_string(attr, type, true);
  return true;
}

bool read_int_attribute(hid_t loc, const std::string& name, int64_t* value) {
  if (MPIACCEL_CHECK_HDF5(H5Aexists(loc, name.c_str())) == 0) return false;
  H5Id attr(MPIACCEL_CHECK_HDF5(H5Aopen(loc, name.c_str(), H5P_DEFAULT)));  // independent
  H5Id type(MPIACCEL_CHECK_HDF5(H5Aget_type(attr)));
  MPIACCEL_CHECK(H5Tget_class(type) == H5T_INTEGER, describe(attr, true) + " is not an integer");
  check_single_value(attr, type, true);
  MPIACCEL_CHECK_HDF5(H5Aread(attr, H5T_NATIVE_INT64, value));
  return true;
}

std::map<std::string, std::string> read_attributes_as_text(hid_t loc) {
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->push_back(name);
    return 0;
  };
  hsize_t index = 0;
  MPIACCEL_CHECK_HDF5(H5Aiterate2(loc, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names));
  std::map<std::string, std::string> out;
  for (const auto& name : names) {
    H5Id attr(MPIACCEL_CHECK_HDF5(H5Aopen(loc, name.c_str(), H5P_DEFAULT)));
    H5Id type(MPIACCEL_CHECK_HDF5(H5Aget_type(attr)));
    if (H5Tget_class(type) == H5T_STRING) {
      out[name] = read_string(attr, type, true);
    } else if (H5Tget_class(type) == H5T_INTEGER) {
      check_single_value(attr, type, true);
      int64_t v = 0;
      MPIACCEL_CHECK_HDF5(H5Aread(attr, H5T_NATIVE_INT64, &v));
      out[name] = std::to_string(v);
    } else if (H5Tget_class(type) == H5T_FLOAT) {
      check_single_value(attr, type, true);
      double v = 0;
      MPIACCEL_CHECK_HDF5(H5Aread(attr, H5T_NATIVE_DOUBLE, &v));
      std::ostringstream text;
      text.precision(17);
      text << v;
      out[name] = text.str();
    }
  }
  return out;
}

void write_text_dataset(hid_t loc, const std::string& name, const std::string& text, bool writer,
                        hid_t dxpl) {
  H5Id type = string_type(text.size());
  H5Id space(MPIACCEL_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dcreate2(loc, name.c_str(), type, space, H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT)));  // collective
  H5Id file_space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  if (!writer) MPIACCEL_CHECK_HDF5(H5Sselect_none(file_space));
  H5Id mem_space(MPIACCEL_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  if (!writer) MPIACCEL_CHECK_HDF5(H5Sselect_none(mem_space));
  std::string padded = text.empty() ? std::string(1, '\0') : text;
  MPIACCEL_CHECK_HDF5(H5Dwrite(dset, type, mem_space, file_space, dxpl, padded.data()));  // collective
}

std::string read_text_dataset(hid_t loc, const std::string& name) {
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(loc, name.c_str(), H5P_DEFAULT)));  // independent
  H5Id type(MPIACCEL_CHECK_HDF5(H5Dget_type(dset)));
  MPIACCEL_CHECK(H5Tget_class(type) == H5T_STRING, describe(dset, false) + " is not text");
  return read_string(dset, type, false);
}

bool object_exists(hid_t file, const std::string& path) {
  // H5Lexists needs every parent to exist: walk the components.
  std::string partial;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    partial = path.substr(0, next);
    if (MPIACCEL_CHECK_HDF5(H5Lexists(file, partial.c_str(), H5P_DEFAULT)) <= 0) return false;
    pos = next + 1;
  }
  return true;
}

}  // namespace mpiaccel::detail
