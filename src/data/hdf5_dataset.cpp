// Rows of HDF5 arrays as samples. Every rank opens the file on its own
// (H5Fopen with the default, serial file access: independent I/O, no MPI
// communicator involved) and reads only the rows of its batches. Nothing is
// read on open beyond the datasets' metadata.
//
// get() runs on loader worker threads and beside a background checkpoint
// save. A contiguous array is read with pread (hdf5_direct.hpp) and never
// waits; any other layout is read by hyperslab with H5Dread under the
// process's HDF5 lock, as are the open and the close.

#include <ATen/ATen.h>
#include <hdf5.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/datasets.hpp"
#include "data/hdf5_direct.hpp"
#include "mpiaccel/error.hpp"
#include "runtime/h5_handle.hpp"

namespace mpiaccel {
namespace detail {

// One HDF5 dataset of the file: its handle and shape, and where its rows lie
// when they can be read directly. (Named outside the anonymous namespace:
// Hdf5Dataset::Impl holds two.)
struct Hdf5Array {
  H5Id dataset;
  std::vector<hsize_t> dims;
  std::string path;
  std::optional<DirectLayout> direct;
};

}  // namespace detail
namespace {

using Array = detail::Hdf5Array;
using detail::DirectFile;
using detail::DirectLayout;
using detail::H5Id;
using detail::Hdf5Lock;
using detail::direct_layout;
using detail::hdf5_mutex;

// The innermost message of HDF5's error stack: what the library itself says.
herr_t innermost(unsigned, const H5E_error2_t* error, void* out) {
  if (error != nullptr && error->desc != nullptr) *static_cast<std::string*>(out) = error->desc;
  return 0;
}

std::string hdf5_reason() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, innermost, &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "HDF5 error" : reason;
}


Array open_array(hid_t file, const std::string& file_path, const std::string& path,
                 const char* role, bool want_integer) {
  Array out;
  out.path = path;
  H5E_BEGIN_TRY { out.dataset = H5Id(H5Dopen2(file, path.c_str(), H5P_DEFAULT)); }
  H5E_END_TRY;
  MPIACCEL_CHECK(out.dataset.valid(),
                 "HDF5 file " + file_path + " has no dataset '" + path + "' for the " + role +
                     "; set [train] hdf5_" + role + " to its path (h5ls -r " + file_path + ")" +
                     (std::string(role) == "labels" ? ", or to an empty value for none" : ""));
  const H5Id type(H5Dget_type(out.dataset.get()));
  const H5T_class_t type_class = H5Tget_class(type.get());
  if (want_integer) {
    MPIACCEL_CHECK(type_class == H5T_INTEGER, "HDF5 dataset " + file_path + ":" + path +
                                                  " holds labels of a non-integer type; labels "
                                                  "must be integers (read as int64)");
  } else {
    MPIACCEL_CHECK(type_class == H5T_INTEGER || type_class == H5T_FLOAT,
                   "HDF5 dataset " + file_path + ":" + path +
                       " is not numeric; inputs must be integers or floats (read as float32)");
  }
  const H5Id space(H5Dget_space(out.dataset.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  MPIACCEL_CHECK(rank >= 1, "HDF5 dataset " + file_path + ":" + path +
                                " is a scalar; it must have the samples on dim 0, shape [N, ...]");
  out.dims.resize(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), out.dims.data(), nullptr);
  out.direct = direct_layout(out.dataset.get(), out.dims);
  return out;
}

// Reads the file rows `rows` (sorted, distinct) of `array` into `out`, one
// row after another, converting to `memory_type`. One H5Dread for the batch:
// runs of consecutive rows become one hyperslab each, OR-ed together. Call
// under the HDF5 lock.
void read_rows(const Array& array, const std::string& file_path, const std::vector<hsize_t>& rows,
               hid_t memory_type, void* out) {
  if (rows.empty()) return;
  const H5Id file_space(H5Dget_space(array.dataset.get()));
  std::vector<hsize_t> start(array.dims.size(), 0);
  std::vector<hsize_t> count = array.dims;
  bool first = true;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    start[0] = rows[i];
    count[0] = j - i;
    MPIACCEL_CHECK(H5Sselect_hyperslab(file_space.get(), first ? H5S_SELECT_SET : H5S_SELECT_OR,
                                       start.data(), nullptr, count.data(), nullptr) >= 0,
                   "HDF5 " + file_path + ":" + array.path + ": cannot select rows: " + hdf5_reason());
    first = false;
    i = j;
  }
  std::vector<hsize_t> memory_dims = array.dims;
  memory_dims[0] = rows.size();
  const H5Id memory_space(
      H5Screate_simple(static_cast<int>(memory_dims.size()), memory_dims.data(), nullptr));
  // independent: this rank alone reads its rows (serial file access).
  MPIACCEL_CHECK(H5Dread(array.dataset.get(), memory_type, memory_space.get(), file_space.get(),
                         H5P_DEFAULT, out) >= 0,
                 "cannot read HDF5 " + file_path + ":" + array.path + ": " + hdf5_reason());
}

// The rows `rows` (sorted, distinct) of `array` as `want` (kFloat inputs,
// kLong labels): directly when its layout allows, else by H5Dread under the
// HDF5 lock. Both convert alike (a C cast per element).
at::Tensor read_array(const DirectFile* direct_file, const std::string& file_path, const Array& array,
                      const std::vector<hsize_t>& rows, at::ScalarType want) {
  std::vector<int64_t> shape(array.dims.begin(), array.dims.end());
  if (array.direct) {
    const std::vector<int64_t> sample(shape.begin() + 1, shape.end());
    return direct_file->read_rows(*array.direct, rows, sample, array.path).to(want);
  }
  shape[0] = static_cast<int64_t>(rows.size());
  at::Tensor out = at::empty(shape, want);
  const Hdf5Lock hdf5(hdf5_mutex());
  read_rows(array, file_path, rows, want == at::kFloat ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64, out.data_ptr());
  return out;
}

}  // namespace

struct Hdf5Dataset::Impl {
  std::string path;
  std::unique_ptr<DirectFile> direct_file;  // when an array is read directly
  H5Id file;
  detail::Hdf5Array inputs;
  detail::Hdf5Array labels;  // dataset invalid when there are none
  int64_t first_row = 0;
  int64_t rows = 0;
  mutable std::atomic<int64_t> rows_read{0};
};

Hdf5Dataset::Hdf5Dataset(const std::string& path, const std::string& inputs_path,
                         const std::string& labels_path, int64_t first_row, int64_t rows)
    : impl_(std::make_unique<Impl>()) {
  const Hdf5Lock hdf5(hdf5_mutex());
  Impl& s = *impl_;
  s.path = path;
  H5E_BEGIN_TRY { s.file = H5Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)); }
  H5E_END_TRY;
  MPIACCEL_CHECK(s.file.valid(), "cannot open HDF5 file " + path + ": " + hdf5_reason() +
                                     "; set [train] data_dir to an HDF5 file, or a directory "
                                     "with train.h5");
  s.inputs = open_array(s.file.get(), path, inputs_path, "inputs", false);
  const auto file_rows = static_cast<int64_t>(s.inputs.dims[0]);
  if (!labels_path.empty()) {
    s.labels = open_array(s.file.get(), path, labels_path, "labels", true);
    MPIACCEL_CHECK(static_cast<int64_t>(s.labels.dims[0]) == file_rows,
                   "HDF5 file " + path + ": labels " + labels_path + " have " +
                       std::to_string(s.labels.dims[0]) + " rows but inputs " + inputs_path +
                       " have " + std::to_string(file_rows) + "; both need one row per sample");
  }
  if (rows < 0) rows = file_rows - first_row;
  MPIACCEL_CHECK(first_row >= 0 && rows >= 1 && first_row + rows <= file_rows,
                 "HDF5 file " + path + ": rows [" + std::to_string(first_row) + ", " +
                     std::to_string(first_row + rows) + ") of " + inputs_path +
                     " are not a non-empty part of its " + std::to_string(file_rows) +
                     " rows; change [train] val_fraction or add data");
  s.first_row = first_row;
  s.rows = rows;
  if (s.inputs.direct || s.labels.direct) s.direct_file = std::make_unique<DirectFile>(path);
}

Hdf5Dataset::~Hdf5Dataset() {
  const Hdf5Lock hdf5(hdf5_mutex());  // the handles close under it
  impl_.reset();
}

int64_t Hdf5Dataset::size() const { return impl_->rows; }
int64_t Hdf5Dataset::file_rows() const { return static_cast<int64_t>(impl_->inputs.dims[0]); }
bool Hdf5Dataset::has_labels() const { return impl_->labels.dataset.valid(); }
int64_t Hdf5Dataset::rows_read() const { return impl_->rows_read.load(); }
bool Hdf5Dataset::reads_directly() const {
  return impl_->inputs.direct && (!impl_->labels.dataset.valid() || impl_->labels.direct);
}

std::vector<int64_t> Hdf5Dataset::sample_shape() const {
  return std::vector<int64_t>(impl_->inputs.dims.begin() + 1, impl_->inputs.dims.end());
}

Batch Hdf5Dataset::get(const std::vector<int64_t>& indices) const {
  const Impl& s = *impl_;
  // The distinct file rows in file order (what HDF5 reads), then each
  // requested sample's place among them.
  std::vector<hsize_t> rows;
  rows.reserve(indices.size());
  for (const int64_t i : indices) {
    MPIACCEL_CHECK(i >= 0 && i < s.rows, "Hdf5Dataset: sample " + std::to_string(i) +
                                             " is not in [0, " + std::to_string(s.rows) + ")");
    rows.push_back(static_cast<hsize_t>(s.first_row + i));
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::vector<int64_t> place;
  place.reserve(indices.size());
  for (const int64_t i : indices) {
    const auto row = static_cast<hsize_t>(s.first_row + i);
    place.push_back(std::lower_bound(rows.begin(), rows.end(), row) - rows.begin());
  }
  const auto distinct = static_cast<int64_t>(rows.size());
  const at::Tensor where = at::tensor(place, at::kLong);

  Batch out;
  const at::Tensor inputs = read_array(s.direct_file.get(), s.path, s.inputs, rows, at::kFloat);
  out.input = distinct == static_cast<int64_t>(indices.size()) && std::is_sorted(place.begin(), place.end())
                  ? inputs
                  : inputs.index_select(0, where);
  if (s.labels.dataset.valid()) {
    out.target = read_array(s.direct_file.get(), s.path, s.labels, rows, at::kLong).index_select(0, where);
  } else {
    out.target = out.input;  // reconstruction: the target is the input
  }
  s.rows_read += distinct;
  return out;
}

}  // namespace mpiaccel
