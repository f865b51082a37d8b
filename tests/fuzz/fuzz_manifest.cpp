// libFuzzer harness: the checkpoint manifest and attribute decoder
// (read_manifest, read_manifest_indexed, read_shard_rows, the tiling check,
// and the byte encoding of the manifest and the shard index between ranks).
//
// HDF5's own parser of the file format is not the target: fuzzing raw bytes
// would mostly exercise libhdf5 (whose 1.10 format parser has known crashes,
// outside this project). The input instead describes a checkpoint as a
// hostile writer could make it with the HDF5 API: a valid checkpoint of 1-3
// tensors (the input's first bytes choose names, dtypes, shapes and shards;
// an empty input is a valid file), then up to 8 lies chosen by the input:
// root attributes of another type or of many values, shard records of any
// rows, names and ranks, a shard index of any shape and values or none (with
// a format_version of any value: version 1 is read without it), datasets of
// any dataspace and type, missing datasets, torch_dtype of any kind, /trainer
// values of any type. The file is built in memory (the core driver) and read
// back by our decoder. Any input must be decoded or
// refused with mpiaccel::Error; a crash, a sanitizer report, another
// exception, or a decoded manifest that does not survive the encoding between
// ranks is a finding.
//   tests/fuzz/run.sh builds it with clang -fsanitize=fuzzer,address,undefined.

#include <fuzzer/FuzzedDataProvider.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "checkpoint/hdf5/h5_attributes.hpp"
#include "checkpoint/hdf5/h5_types.hpp"
#include "checkpoint/manifest/manifest_codec.hpp"
#include "checkpoint/manifest/manifest_reader.hpp"
#include "checkpoint/save/shard_table_writer.hpp"
#include "mpiaccel/error.hpp"

namespace {

using Provider = FuzzedDataProvider;
namespace d = mpiaccel::detail;

// Mostly small numbers (the interesting edges), sometimes any 64-bit value.
int64_t number(Provider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<int64_t>(-2, 16);
    case 1: return int64_t{1} << in.ConsumeIntegralInRange<int>(0, 62);
    default: return in.ConsumeIntegral<int64_t>();
  }
}

const at::ScalarType kDtypes[] = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong,
                                  at::kInt,   at::kShort,  at::kChar, at::kByte,     at::kBool};

struct Tensor {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<hsize_t> dims;
  bool has_dataset = true;
};

// What the file will hold: valid unless a lie changed it.
struct Plan {
  std::vector<Tensor> tensors;
  std::vector<d::ShardRecord> records;  // sorted by tensor, as a save writes them
  std::vector<int64_t> index;           // [tensors][2]
  std::vector<hsize_t> index_dims;
  size_t name_length = 0;
};

Plan valid_plan(Provider& in) {
  Plan plan;
  const int tensors = in.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < tensors; ++i) {
    Tensor t;
    t.name = "model/t" + std::to_string(i);
    t.dtype = kDtypes[in.ConsumeIntegralInRange<int>(0, 9)];
    for (int r = in.ConsumeIntegralInRange<int>(0, 2); r > 0; --r)
      t.dims.push_back(in.ConsumeIntegralInRange<hsize_t>(0, 5));
    const int64_t rows = t.dims.empty() ? 1 : static_cast<int64_t>(t.dims[0]);
    const int64_t first_shard = plan.records.size();
    for (int64_t first = 0, rank = 0; first < rows || (rows == 0 && rank == 0); ++rank) {
      const int64_t n = std::min<int64_t>(rows - first, in.ConsumeIntegralInRange<int64_t>(1, 3));
      plan.records.push_back({t.name, static_cast<int32_t>(rank), first, n, in.ConsumeIntegral<uint32_t>()});
      first += std::max<int64_t>(n, 1);
    }
    plan.index.push_back(first_shard);
    plan.index.push_back(static_cast<int64_t>(plan.records.size()) - first_shard);
    plan.name_length = std::max(plan.name_length, t.name.size() + 1);
    plan.tensors.push_back(t);
  }
  plan.index_dims = {plan.tensors.size(), 2};
  return plan;
}

// One lie about the plan's tables and tensors.
void lie_about_plan(Provider& in, Plan& plan) {
  auto& t = plan.tensors[in.ConsumeIntegralInRange<size_t>(0, plan.tensors.size() - 1)];
  auto& r = plan.records[in.ConsumeIntegralInRange<size_t>(0, plan.records.size() - 1)];
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: r.first_row = number(in); break;
    case 1: r.rows = number(in); break;
    case 2: r.rank = static_cast<int32_t>(number(in)); break;
    case 3: r.name = in.ConsumeBool() ? plan.tensors[0].name : in.ConsumeRandomLengthString(16); break;
    case 4: t.has_dataset = false; break;
    case 5: t.dims.assign(in.ConsumeIntegralInRange<size_t>(0, 3), 0);
            for (auto& dim : t.dims) dim = static_cast<hsize_t>(number(in)) & ((hsize_t{1} << 62) - 1);
            break;
    case 6: plan.index[in.ConsumeIntegralInRange<size_t>(0, plan.index.size() - 1)] = number(in); break;
    case 7: plan.index_dims = {in.ConsumeIntegralInRange<hsize_t>(0, 4)};
            if (in.ConsumeBool()) plan.index_dims.push_back(in.ConsumeIntegralInRange<hsize_t>(0, 3));
            if (in.ConsumeIntegralInRange<int>(0, 3) == 0) plan.index_dims.clear();  // no index
            break;
    case 8: plan.name_length = in.ConsumeIntegralInRange<size_t>(1, 24); break;
    default: std::swap(plan.records.front(), plan.records.back()); break;
  }
}

// An attribute `key` on `loc` that lies: another type, many values, absent.
void lying_attribute(Provider& in, hid_t loc, const std::string& key) {
  if (H5Aexists(loc, key.c_str()) > 0) H5Adelete(loc, key.c_str());
  const int kind = in.ConsumeIntegralInRange<int>(0, 3);
  if (kind == 3) return;  // absent
  const hsize_t many[1] = {in.ConsumeIntegralInRange<hsize_t>(0, 40)};
  hid_t space = in.ConsumeBool() ? H5Screate_simple(1, many, nullptr) : H5Screate(H5S_SCALAR);
  const size_t points = static_cast<size_t>(H5Sget_simple_extent_npoints(space));
  hid_t type = -1;
  std::vector<unsigned char> bytes;
  if (kind == 0) {
    const std::string text = in.ConsumeRandomLengthString(40);
    type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, text.size() + 1);
    for (size_t i = 0; i < points; ++i) bytes.insert(bytes.end(), text.c_str(), text.c_str() + text.size() + 1);
  } else {
    type = H5Tcopy(kind == 1 ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE);
    for (size_t i = 0; i < points; ++i) {
      const int64_t v = number(in);
      bytes.insert(bytes.end(), reinterpret_cast<const unsigned char*>(&v),
                   reinterpret_cast<const unsigned char*>(&v) + 8);
    }
  }
  hid_t attr = H5Acreate2(loc, key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) {
    if (points > 0) H5Awrite(attr, type, bytes.data());
    H5Aclose(attr);
  }
  H5Tclose(type);
  H5Sclose(space);
}

// The tensor's dataset (data never written: allocated late, so a huge
// dataspace takes no memory), of its dtype's type or, lying, another.
void write_tensor(Provider& in, hid_t file, const Tensor& t, bool lie) {
  if (!t.has_dataset) return;
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
  hid_t space = t.dims.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(t.dims.size()), t.dims.data(), nullptr);
  d::H5Id type = d::make_file_type(lie ? kDtypes[in.ConsumeIntegralInRange<int>(0, 9)] : t.dtype);
  hid_t dset = H5Dcreate2(file, ("/" + t.name).c_str(), type.get(), space, lcpl, dcpl, H5P_DEFAULT);
  if (dset >= 0) {
    if (lie && in.ConsumeBool())
      lying_attribute(in, dset, "torch_dtype");
    else
      d::write_string_attribute(dset, "torch_dtype", lie ? in.ConsumeRandomLengthString(12)
                                                         : mpiaccel::checkpoint_dtype_name(t.dtype));
    H5Dclose(dset);
  }
  H5Sclose(space);
  H5Pclose(dcpl);
  H5Pclose(lcpl);
}

void write_tables(const Plan& plan, hid_t file) {
  hid_t meta = H5Gcreate2(file, "/meta", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<int64_t> positions(plan.records.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(i);
  d::write_shard_table(meta, plan.records, positions, plan.records.size(), plan.name_length, H5P_DEFAULT);
  if (!plan.index_dims.empty()) {
    hid_t space = H5Screate_simple(static_cast<int>(plan.index_dims.size()), plan.index_dims.data(), nullptr);
    std::vector<int64_t> values(static_cast<size_t>(H5Sget_simple_extent_npoints(space)) + 1, 0);
    std::copy_n(plan.index.begin(), std::min(plan.index.size(), values.size()), values.begin());
    hid_t dset = H5Dcreate2(meta, "shard_index", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (dset >= 0) {
      H5Dwrite(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      H5Dclose(dset);
    }
    H5Sclose(space);
  }
  H5Gclose(meta);
}

void write_root(hid_t file) {
  d::write_string_attribute(file, "format", d::kFormatName);
  d::write_int_attribute(file, "format_version", mpiaccel::kCheckpointFormatVersion);
  d::write_int_attribute(file, "step", 7);
  d::write_int_attribute(file, "world_size", 2);
  d::write_string_attribute(file, "strategy", "ddp");
  hid_t trainer = H5Gcreate2(file, "/trainer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  d::write_int_attribute(trainer, "samples_seen", 112);
  d::write_text_dataset(trainer, "rng", "generator state", true, H5P_DEFAULT);
  H5Gclose(trainer);
}

// One lie about the root attributes or /trainer.
void lie_about_root(Provider& in, hid_t file) {
  static const char* const kRootKeys[] = {"format", "format_version", "step", "world_size", "strategy"};
  if (in.ConsumeBool()) {
    lying_attribute(in, file, kRootKeys[in.ConsumeIntegralInRange<int>(0, 4)]);
    return;
  }
  hid_t trainer = H5Gopen2(file, "/trainer", H5P_DEFAULT);
  if (in.ConsumeBool()) {
    lying_attribute(in, trainer, in.ConsumeRandomLengthString(8));
  } else {  // a text value of another type or dataspace
    H5Ldelete(trainer, "rng", H5P_DEFAULT);
    const hsize_t dims[1] = {in.ConsumeIntegralInRange<hsize_t>(0, 40)};
    hid_t space = in.ConsumeBool() ? H5Screate_simple(1, dims, nullptr) : H5Screate(H5S_SCALAR);
    d::H5Id type = d::make_file_type(kDtypes[in.ConsumeIntegralInRange<int>(0, 9)]);
    hid_t text = H5Tcopy(H5T_C_S1);
    H5Tset_size(text, in.ConsumeBool() ? H5T_VARIABLE : in.ConsumeIntegralInRange<size_t>(1, 64));
    hid_t dset = H5Dcreate2(trainer, "rng", in.ConsumeBool() ? text : type.get(), space, H5P_DEFAULT,
                            H5P_DEFAULT, H5P_DEFAULT);
    if (dset >= 0) H5Dclose(dset);
    H5Tclose(text);
    H5Sclose(space);
  }
  H5Gclose(trainer);
}

// Builds the described checkpoint in memory; returns the open file.
hid_t build_file(Provider& in) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_core(fapl, 1 << 16, 0);  // in memory, never written out
  H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
  hid_t file = H5Fcreate("fuzz.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  H5Pclose(fapl);
  if (file < 0) return file;
  Plan plan = valid_plan(in);
  const int lies = in.ConsumeIntegralInRange<int>(0, 8);
  std::vector<int> root_lies;
  for (int i = 0; i < lies; ++i) {
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0)
      root_lies.push_back(i);
    else
      lie_about_plan(in, plan);
  }
  write_root(file);
  for (size_t i = 0; i < root_lies.size(); ++i) lie_about_root(in, file);
  write_tables(plan, file);
  for (const Tensor& t : plan.tensors) write_tensor(in, file, t, in.ConsumeIntegralInRange<int>(0, 7) == 7);
  return file;
}

// A decoded manifest must survive the encoding between ranks unchanged.
void check_round_trip(const mpiaccel::CheckpointInfo& info) {
  const std::string bytes = d::encode_manifest(info);
  if (d::encode_manifest(d::decode_manifest(bytes)) != bytes) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // refusals are mpiaccel::Error, not HDF5 prints
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The raw bytes as a message between ranks: decoded or refused.
  try {
    d::decode_manifest(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const mpiaccel::Error&) {
  }
  Provider in(data, size);
  const hid_t file = build_file(in);
  if (file < 0) return 0;
  try {
    check_round_trip(d::read_manifest(file, "fuzz.h5"));
  } catch (const mpiaccel::Error&) {
  }
  try {
    d::ShardIndex index;
    mpiaccel::CheckpointInfo info = d::read_manifest_indexed(file, "fuzz.h5", &index);
    const std::string index_bytes = d::encode_shard_index(index);
    if (d::encode_shard_index(d::decode_shard_index(index_bytes, info.tensors.size())) != index_bytes)
      std::abort();
    for (size_t i = 0; index.present && i < info.tensors.size(); ++i) {
      auto& shards = info.tensors[i].shards;
      for (const auto& r : d::read_shard_rows(file, "fuzz.h5", index.first[i], index.count[i], H5P_DEFAULT))
        shards.push_back({r.rank, r.first_row, r.rows, r.crc32c});
      std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) { return a.first_row < b.first_row; });
      d::check_shard_tiling("fuzz.h5", info.tensors[i]);
    }
    check_round_trip(info);
  } catch (const mpiaccel::Error&) {
  }
  H5Fclose(file);
  return 0;
}
