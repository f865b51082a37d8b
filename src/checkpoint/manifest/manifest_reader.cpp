#include "checkpoint/manifest/manifest_reader.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <unordered_map>

#include "checkpoint/hdf5/h5_attributes.hpp"
#include "checkpoint/hdf5/h5_types.hpp"
#include "checkpoint/plan/row_tiling.hpp"
#include "checkpoint/manifest/shard_record_type.hpp"
#include "mpiaccel/version.hpp"
#include "runtime/check_hdf5.hpp"

namespace mpiaccel {

const TensorInfo* CheckpointInfo::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

namespace detail {
namespace {

// The shard table's dataset, checked to be one.
H5Id open_shard_table(hid_t file, const std::string& path, size_t* name_length, int64_t* count) {
  MPIACCEL_CHECK(object_exists(file, kShardTablePath),
                 "checkpoint " + path + " has no " + kShardTablePath +
                     " (incomplete or damaged file)");
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(file, kShardTablePath, H5P_DEFAULT)));  // independent
  H5Id ftype(MPIACCEL_CHECK_HDF5(H5Dget_type(dset)));
  MPIACCEL_CHECK(H5Tget_class(ftype) == H5T_COMPOUND && H5Tget_nmembers(ftype) == 5,
                 "checkpoint " + path + ": " + kShardTablePath + " is not the shard table");
  const int name_index = H5Tget_member_index(ftype, "name");
  MPIACCEL_CHECK(name_index >= 0, "checkpoint " + path + ": shard table without names");
  H5Id name_type(MPIACCEL_CHECK_HDF5(H5Tget_member_type(ftype, name_index)));
  *name_length = H5Tget_size(name_type);
  H5Id space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  *count = H5Sget_simple_extent_npoints(space);
  MPIACCEL_CHECK(*count >= 0, "checkpoint " + path + ": unreadable shard table");
  return dset;
}

// Reads the table rows `selection` picks (all when it is H5S_ALL), `n` of them.
std::vector<ShardRecord> read_selected_records(hid_t dset, size_t name_length, hid_t selection,
                                               size_t n, hid_t dxpl) {
  size_t record_size = 0;
  H5Id mtype = shard_memory_type(name_length, &record_size);
  std::vector<unsigned char> buffer(record_size * n + 1);
  const hsize_t dims[1] = {n};
  H5Id mem_space(MPIACCEL_CHECK_HDF5(H5Screate_simple(1, dims, nullptr)));
  if (n > 0)
    MPIACCEL_CHECK_HDF5(H5Dread(dset, mtype, selection == H5S_ALL ? H5S_ALL : mem_space.get(),
                                selection, dxpl, buffer.data()));  // independent
  std::vector<ShardRecord> records(n);
  for (size_t i = 0; i < records.size(); ++i)
    records[i] = unpack_shard_record(buffer.data() + i * record_size, name_length);
  return records;
}

void read_tensor_header(hid_t file, const std::string& path, TensorInfo* t) {
  const std::string where = "checkpoint " + path + ": tensor " + t->name;
  MPIACCEL_CHECK(object_exists(file, "/" + t->name),
                 where + " is listed in /meta/shards but has no dataset (incomplete file)");
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(file, ("/" + t->name).c_str(), H5P_DEFAULT)));  // independent
  H5Id space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  const int rank = MPIACCEL_CHECK_HDF5(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) MPIACCEL_CHECK_HDF5(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  t->shape.assign(dims.begin(), dims.end());
  std::string dtype;
  MPIACCEL_CHECK(read_string_attribute(dset, "torch_dtype", &dtype),
                 where + " has no torch_dtype attribute");
  MPIACCEL_CHECK(parse_checkpoint_dtype(dtype, &t->dtype),
                 where + " has unknown torch_dtype '" + dtype + "'");
  H5Id type(MPIACCEL_CHECK_HDF5(H5Dget_type(dset)));
  const std::string mismatch = file_type_mismatch(type, t->dtype);
  MPIACCEL_CHECK(mismatch.empty(), where + ": HDF5 type does not hold " + dtype + ": " + mismatch);
  // A file may claim any dataspace: the byte count is computed without
  // overflow and bounded before anything is sized from it.
  int64_t bytes = static_cast<int64_t>(c10::elementSize(t->dtype));
  for (int64_t d : t->shape)
    MPIACCEL_CHECK(d >= 0 && !__builtin_mul_overflow(bytes, d, &bytes) && bytes <= kMaxTensorBytes,
                   where + " claims shape " + shape_text(t->shape) + ", more than " +
                       std::to_string(kMaxTensorBytes >> 40) + " TiB (a damaged or hostile file)");
  t->bytes = bytes;
}

void check_tiling(const std::string& path, const TensorInfo& t) {
  const int64_t rows = row_count_of(t.shape);
  const std::string tensor = "checkpoint " + path + ": tensor " + t.name + ": ";
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& s : t.shards) {
    MPIACCEL_CHECK(s.rows >= 0 && s.first_row >= 0 && s.rows <= rows && s.first_row <= rows - s.rows,
                   tensor + "a shard claims rows [" + std::to_string(s.first_row) + ", +" +
                       std::to_string(s.rows) + ") outside its " + std::to_string(rows) +
                       " rows (damaged /meta/shards)");
    ranges.emplace_back(s.first_row, s.rows);
  }
  const TilingFault fault = find_tiling_fault(ranges, rows);
  MPIACCEL_CHECK(fault.kind == TilingFault::kNone,
                 tensor + "rows [" + std::to_string(fault.begin) + ", " + std::to_string(fault.end) +
                     ") " + (fault.kind == TilingFault::kHole ? "are in no shard" : "are in two shards") +
                     " (incomplete or damaged /meta/shards)");
}

// The writer of a file of a newer format version, if the file names one:
// the mpiaccel to read it with. A damaged attribute just leaves it unnamed.
std::string writer_version(hid_t file) {
  std::string writer;
  try {
    read_string_attribute(file, "mpiaccel_version", &writer);
  } catch (const Error&) {
    writer.clear();
  }
  return writer;
}

// The manifest without its tensors: root attributes, config, trainer, optim.
CheckpointInfo read_manifest_header(hid_t file, const std::string& path) {
  check_format(file, path);
  CheckpointInfo info;
  info.path = path;
  int64_t value = 0;
  read_int_attribute(file, "format_version", &value);
  info.format_version = static_cast<int>(value);
  MPIACCEL_CHECK(read_int_attribute(file, "step", &info.step),
                 "checkpoint " + path + " has no step attribute");
  MPIACCEL_CHECK(read_int_attribute(file, "world_size", &value),
                 "checkpoint " + path + " has no world_size attribute");
  info.world_size = static_cast<int>(value);
  read_string_attribute(file, "strategy", &info.strategy);
  read_string_attribute(file, "mpiaccel_version", &info.mpiaccel_version);
  read_string_attribute(file, "torch_version", &info.torch_version);
  read_string_attribute(file, "created_utc", &info.created_utc);
  if (object_exists(file, kConfigPath)) info.config_text = read_text_dataset(file, kConfigPath);

  if (object_exists(file, "/trainer")) {
    H5Id group(MPIACCEL_CHECK_HDF5(H5Gopen2(file, "/trainer", H5P_DEFAULT)));
    info.trainer = read_attributes_as_text(group);
    // Values too long for an attribute are scalar text datasets of the group.
    H5G_info_t ginfo{};
    MPIACCEL_CHECK_HDF5(H5Gget_info(group, &ginfo));
    for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
      char name[1024] = {0};
      MPIACCEL_CHECK_HDF5(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name,
                                             sizeof name, H5P_DEFAULT));
      info.trainer[name] = read_text_dataset(group, name);
    }
  }
  if (object_exists(file, "/optim")) {
    H5Id group(MPIACCEL_CHECK_HDF5(H5Gopen2(file, "/optim", H5P_DEFAULT)));
    info.attributes = read_attributes_as_text(group);
  }

  return info;
}

// Errors of the generic HDF5 readers (h5_attributes) name the object, not
// the file: the manifest's readers add it.
template <class Read>
CheckpointInfo naming_the_file(const std::string& path, Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    if (e.message().find(path) != std::string::npos) throw;
    MPIACCEL_THROW("checkpoint " + path + ": " + e.message());
  }
}

// Whether the file's shard table comes with /meta/shard_index: never in
// version 1 (files of that version are read the old way, even the later
// ones that carry an index), always from version 2 on.
bool has_shard_index(hid_t file, const CheckpointInfo& info) {
  if (info.format_version < kShardIndexFormatVersion) return false;
  MPIACCEL_CHECK(object_exists(file, kShardIndexPath),
                 "checkpoint " + info.path + " has format version " +
                     std::to_string(info.format_version) + " but no " + kShardIndexPath +
                     " (damaged file)");
  return true;
}

// The tensors of the whole shard table, each with its shards, checked.
void add_tensors_from_table(hid_t file, CheckpointInfo& info) {
  size_t name_length = 0;
  int64_t count = 0;
  H5Id table = open_shard_table(file, info.path, &name_length, &count);
  const std::vector<ShardRecord> records = read_selected_records(
      table, name_length, H5S_ALL, static_cast<size_t>(count), H5P_DEFAULT);
  std::unordered_map<std::string, size_t> index;
  for (const auto& r : records) {
    auto it = index.find(r.name);
    if (it == index.end()) {
      it = index.emplace(r.name, info.tensors.size()).first;
      info.tensors.emplace_back();
      info.tensors.back().name = r.name;
    }
    info.tensors[it->second].shards.push_back({r.rank, r.first_row, r.rows, r.crc32c});
  }
  for (auto& t : info.tensors) {
    read_tensor_header(file, info.path, &t);
    std::sort(t.shards.begin(), t.shards.end(),
              [](const ShardInfo& a, const ShardInfo& b) { return a.first_row < b.first_row; });
    check_tiling(info.path, t);
  }
}

// /meta/shard_index, checked to continue the table of `table_rows` rows
// without a gap; returns each tensor's first table row.
std::vector<hsize_t> read_shard_index(hid_t file, const std::string& path, int64_t table_rows,
                                      ShardIndex* index) {
  // [tensors][2] int64: each tensor's first row in the table and its count.
  H5Id dset(MPIACCEL_CHECK_HDF5(H5Dopen2(file, kShardIndexPath, H5P_DEFAULT)));  // independent
  H5Id space(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  hsize_t dims[2] = {0, 0};
  const bool shaped = H5Sget_simple_extent_ndims(space) == 2 &&
                      H5Sget_simple_extent_dims(space, dims, nullptr) == 2 && dims[1] == 2 &&
                      dims[0] <= static_cast<hsize_t>(table_rows);
  MPIACCEL_CHECK(shaped, "checkpoint " + path + ": " + kShardIndexPath +
                             " is not a [tensors, 2] index of /meta/shards (damaged file)");
  std::vector<int64_t> pairs(2 * dims[0] + 1);
  if (dims[0] > 0)
    MPIACCEL_CHECK_HDF5(H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                pairs.data()));  // independent
  const size_t n = dims[0];
  index->first.resize(n);
  index->count.resize(n);
  int64_t next = 0;
  std::vector<hsize_t> firsts(n);
  for (size_t i = 0; i < n; ++i) {
    index->first[i] = pairs[2 * i];
    index->count[i] = pairs[2 * i + 1];
    MPIACCEL_CHECK(index->first[i] == next && index->count[i] >= 1 &&
                       index->count[i] <= table_rows - next,
                   "checkpoint " + path + ": " + kShardIndexPath + " row " + std::to_string(i) +
                       " does not continue /meta/shards (damaged file)");
    firsts[i] = static_cast<hsize_t>(next);
    next += index->count[i];
  }
  MPIACCEL_CHECK(next == table_rows, "checkpoint " + path + ": " + kShardIndexPath + " covers " +
                                         std::to_string(next) + " of the " +
                                         std::to_string(table_rows) + " rows of /meta/shards");
  return firsts;
}

// The tensors named by the index, without their shards: each tensor's name
// from its first table row, O(tensors) reads, not O(shards).
void add_tensors_from_index(hid_t file, CheckpointInfo& info, ShardIndex* index) {
  size_t name_length = 0;
  int64_t table_rows = 0;
  H5Id table = open_shard_table(file, info.path, &name_length, &table_rows);
  const std::vector<hsize_t> firsts = read_shard_index(file, info.path, table_rows, index);
  const size_t n = firsts.size();
  H5Id selection(MPIACCEL_CHECK_HDF5(H5Dget_space(table)));
  if (n > 0)
    MPIACCEL_CHECK_HDF5(H5Sselect_elements(selection, H5S_SELECT_SET, n, firsts.data()));
  const auto heads = read_selected_records(table, name_length, selection, n, H5P_DEFAULT);
  std::unordered_map<std::string, size_t> seen;
  info.tensors.resize(n);
  for (size_t i = 0; i < n; ++i) {
    MPIACCEL_CHECK(seen.emplace(heads[i].name, i).second,
                   "checkpoint " + info.path + ": tensor " + heads[i].name +
                       " appears twice in " + kShardIndexPath + " (damaged file)");
    info.tensors[i].name = heads[i].name;
    read_tensor_header(file, info.path, &info.tensors[i]);
  }
}

}  // namespace

H5Id open_checkpoint_file_serial(const std::string& path) {
  struct stat st {};
  MPIACCEL_CHECK(::stat(path.c_str(), &st) == 0,
                 "checkpoint " + path + " does not exist");
  MPIACCEL_CHECK(S_ISREG(st.st_mode), "checkpoint " + path + " is not a regular file");
  htri_t is_hdf5 = 0;
  H5E_BEGIN_TRY { is_hdf5 = H5Fis_hdf5(path.c_str()); }
  H5E_END_TRY;
  MPIACCEL_CHECK(is_hdf5 > 0, "not an mpiaccel checkpoint: " + path +
                                  " is not an HDF5 file (no HDF5 signature; empty, "
                                  "overwritten or never completed)");
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);  // independent (sec2)
  if (file < 0)
    MPIACCEL_THROW("cannot open checkpoint " + path + " (truncated or damaged file?): " +
                   hdf5_error_stack());
  return H5Id(file);
}

void check_format(hid_t file, const std::string& path) {
  std::string format;
  MPIACCEL_CHECK(read_string_attribute(file, "format", &format),
                 "not an mpiaccel checkpoint: " + path + " (format attribute missing)");
  MPIACCEL_CHECK(format == kFormatName, "not an mpiaccel checkpoint: " + path + " (format is '" +
                                            format + "', expected '" + kFormatName + "')");
  int64_t version = 0;
  MPIACCEL_CHECK(read_int_attribute(file, "format_version", &version),
                 "checkpoint " + path + " has no format_version attribute");
  MPIACCEL_CHECK(version >= 1, "checkpoint " + path + " has format version " +
                                   std::to_string(version) + ", which no mpiaccel writes (damaged file)");
  if (version <= kCheckpointFormatVersion) return;
  const std::string writer = writer_version(file);
  MPIACCEL_THROW("checkpoint " + path + " has format version " + std::to_string(version) +
                 "; this mpiaccel (" + MPIACCEL_VERSION_STRING + ") reads versions 1 to " +
                 std::to_string(kCheckpointFormatVersion) + ": load it with " +
                 (writer.empty() ? std::string("a newer mpiaccel")
                                 : "mpiaccel " + writer + ", which wrote it, or newer"));
}

CheckpointInfo read_manifest(hid_t file, const std::string& path) {
  return naming_the_file(path, [&] {
    CheckpointInfo info = read_manifest_header(file, path);
    has_shard_index(file, info);  // a version that has one and lost it is damaged
    add_tensors_from_table(file, info);
    return info;
  });
}

CheckpointInfo read_manifest_indexed(hid_t file, const std::string& path, ShardIndex* index) {
  return naming_the_file(path, [&] {
    CheckpointInfo info = read_manifest_header(file, path);
    index->present = has_shard_index(file, info);
    if (index->present)
      add_tensors_from_index(file, info, index);
    else
      add_tensors_from_table(file, info);
    return info;
  });
}

std::vector<ShardRecord> read_shard_rows(hid_t file, const std::string& path, int64_t first,
                                         int64_t count, hid_t dxpl) {
  size_t name_length = 0;
  int64_t table_rows = 0;
  H5Id dset = open_shard_table(file, path, &name_length, &table_rows);
  MPIACCEL_CHECK(first >= 0 && count >= 0 && first + count <= table_rows,
                 "checkpoint " + path + ": rows [" + std::to_string(first) + ", " +
                     std::to_string(first + count) + ") outside /meta/shards");
  H5Id selection(MPIACCEL_CHECK_HDF5(H5Dget_space(dset)));
  const hsize_t start[1] = {static_cast<hsize_t>(first)}, n[1] = {static_cast<hsize_t>(count)};
  if (count > 0)
    MPIACCEL_CHECK_HDF5(H5Sselect_hyperslab(selection, H5S_SELECT_SET, start, nullptr, n, nullptr));
  else
    MPIACCEL_CHECK_HDF5(H5Sselect_none(selection));
  return read_selected_records(dset, name_length, selection, static_cast<size_t>(count), dxpl);
}

void check_shard_tiling(const std::string& path, const TensorInfo& t) { check_tiling(path, t); }

}  // namespace detail
}  // namespace mpiaccel
