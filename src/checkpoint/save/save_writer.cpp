// The collective HDF5 section of a save; see save_writer.hpp and the phase list
// in checkpoint_save.cpp. All HDF5 calls are made from the calling thread.

#include "checkpoint/save/save_writer.hpp"

#include <hdf5.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "checkpoint/collective_phases.hpp"
#include "checkpoint/save/commit.hpp"
#include "checkpoint/save/crash_point.hpp"
#include "checkpoint/hdf5/h5_attributes.hpp"
#include "checkpoint/hdf5/h5_types.hpp"
#include "checkpoint/hdf5/parallel_file.hpp"
#include "checkpoint/save/raw_writer.hpp"
#include "checkpoint/save/shard_table_writer.hpp"
#include "mpiaccel/version.hpp"
#include "runtime/check_hdf5.hpp"
#include "core/dtype_names.hpp"

namespace mpiaccel::detail {
namespace {

struct OpenDataset {
  H5Id dataset;
  hid_t type = H5I_INVALID_HID;  // owned by the TypeCache
  const LocalShard* shard = nullptr;
};

class TypeCache {
 public:
  explicit TypeCache(hid_t file) : file_(file) {}
  hid_t get(at::ScalarType dtype) {
    auto it = types_.find(dtype);
    if (it != types_.end()) return it->second;
    H5Id type = make_file_type(dtype);
    if (dtype == at::kBFloat16) {
      // A named (committed) type, so h5ls/h5dump show it as /types/bfloat16.
      H5Id lcpl(MPIACCEL_CHECK_HDF5(H5Pcreate(H5P_LINK_CREATE)));
      MPIACCEL_CHECK_HDF5(H5Pset_create_intermediate_group(lcpl, 1));
      MPIACCEL_CHECK_HDF5(H5Tcommit2(file_, kBfloat16TypePath, type, lcpl, H5P_DEFAULT,
                                     H5P_DEFAULT));  // collective
    }
    hid_t id = type.get();
    owned_.push_back(std::move(type));
    types_[dtype] = id;
    return id;
  }
  /// Closes the types (a committed type is an open object of the file).
  void clear() {
    owned_.clear();
    types_.clear();
  }

 private:
  hid_t file_;
  std::map<at::ScalarType, hid_t> types_;
  std::vector<H5Id> owned_;
};

H5Id create_tensor_dataset(hid_t file, hid_t lcpl, hid_t dcpl, const LocalShard& s, hid_t type) {
  const auto& shape = s.tensor->global_shape;
  H5Id space;
  if (shape.empty()) {
    space = H5Id(MPIACCEL_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  } else {
    std::vector<hsize_t> dims(shape.begin(), shape.end());
    space = H5Id(MPIACCEL_CHECK_HDF5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  }
  const std::string path = "/" + s.tensor->name;
  H5Id dset(MPIACCEL_CHECK_HDF5(
      H5Dcreate2(file, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT)));  // collective
  write_string_attribute(dset, "torch_dtype", dtype_name(s.dtype));           // collective
  return dset;
}

// Where this rank's rows of a tensor go in the file: the dataset's address
// (contiguous, allocated at creation) plus the rows before them.
int64_t rows_offset(const OpenDataset& d) {
  const haddr_t base = H5Dget_offset(d.dataset);  // local query
  MPIACCEL_CHECK(base != HADDR_UNDEF, "HDF5 allocated no storage for tensor " +
                                          d.shard->tensor->name + ": " + hdf5_error_stack());
  return static_cast<int64_t>(base) + d.shard->tensor->row_begin * d.shard->row_bytes;
}

// The file and every object phase 3 creates. Members close in reverse order
// of creation, on every rank alike: also when an agreed error unwinds.
struct FileObjects {
  explicit FileObjects(H5Id created) : file(std::move(created)), types(file) {}

  /// Closes every object but the file itself (H5Fclose then writes the metadata).
  void close_objects() {
    datasets.clear();
    rng_datasets.clear();
    meta.reset();
    rng_group.reset();
    types.clear();
  }

  H5Id file;
  TypeCache types;
  std::vector<OpenDataset> datasets;
  H5Id meta, rng_group;
  std::vector<H5Id> rng_datasets;
};

H5Id create_file(CollectivePhases& phases, const WriteInput& in) {
  H5Id fapl = make_parallel_fapl(in.world);
  H5Id file;
  phases.record([&] {
    file = H5Id(H5Fcreate(in.tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl));  // collective
    MPIACCEL_CHECK(file.valid(), "cannot create " + in.tmp_path + ": " + hdf5_error_stack());
  });
  phases.agree();
  return file;
}

void write_root_attributes(hid_t file, const WriteInput& in) {
  write_string_attribute(file, "format", kFormatName);  // collective (all below too)
  write_int_attribute(file, "format_version", kCheckpointFormatVersion);
  write_int_attribute(file, "step", in.step);
  write_int_attribute(file, "world_size", in.size);
  write_string_attribute(file, "strategy", in.plan->strategy);
  write_string_attribute(file, "mpiaccel_version", version());
  write_string_attribute(file, "torch_version", TORCH_VERSION);
  write_string_attribute(file, "created_utc", in.plan->created_utc);
}

H5Id link_creation_list() {
  H5Id lcpl(MPIACCEL_CHECK_HDF5(H5Pcreate(H5P_LINK_CREATE)));
  MPIACCEL_CHECK_HDF5(H5Pset_create_intermediate_group(lcpl, 1));
  return lcpl;
}

H5Id dataset_creation_list() {
  H5Id dcpl(MPIACCEL_CHECK_HDF5(H5Pcreate(H5P_DATASET_CREATE)));
  MPIACCEL_CHECK_HDF5(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
  // Write-once data: no fill pass (a parallel fill of 512 MiB costs ~1 s).
  MPIACCEL_CHECK_HDF5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
  MPIACCEL_CHECK_HDF5(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
  return dcpl;
}

void write_optim_group(hid_t file, hid_t lcpl, const SharedPlan& plan) {
  H5Id optim(MPIACCEL_CHECK_HDF5(H5Gcreate2(file, "optim", lcpl, H5P_DEFAULT, H5P_DEFAULT)));  // collective
  for (const auto& [key, value] : plan.attributes) {
    MPIACCEL_CHECK(value.size() <= kMaxAttributeText,
                   "checkpoint: attribute '" + key + "' is " + std::to_string(value.size()) +
                       " bytes; state attributes are for small values (at most " +
                       std::to_string(kMaxAttributeText) + ")");
    write_string_attribute(optim, key, value);  // collective
  }
}

// Phase 3: every group, dataset and attribute. Identical calls on every rank.
void create_objects(FileObjects& f, const WriteInput& in) {
  write_root_attributes(f.file, in);
  H5Id lcpl = link_creation_list();
  H5Id dcpl = dataset_creation_list();
  write_optim_group(f.file, lcpl, *in.plan);
  for (const auto& s : *in.shards) {
    OpenDataset d;
    d.shard = &s;
    d.type = f.types.get(s.dtype);
    d.dataset = create_tensor_dataset(f.file, lcpl, dcpl, s, d.type);
    f.datasets.push_back(std::move(d));
  }
  // collective, all below
  f.meta = H5Id(MPIACCEL_CHECK_HDF5(H5Gcreate2(f.file, "meta", lcpl, H5P_DEFAULT, H5P_DEFAULT)));
  H5Id trainer(MPIACCEL_CHECK_HDF5(H5Gcreate2(f.file, "trainer", lcpl, H5P_DEFAULT, H5P_DEFAULT)));
  f.rng_group = H5Id(MPIACCEL_CHECK_HDF5(H5Gcreate2(f.file, "rng", lcpl, H5P_DEFAULT, H5P_DEFAULT)));
  for (int r = 0; r < in.size; ++r) {
    const hsize_t dims[1] = {static_cast<hsize_t>(in.rng_sizes[static_cast<size_t>(r)])};
    H5Id space(MPIACCEL_CHECK_HDF5(H5Screate_simple(1, dims, nullptr)));
    f.rng_datasets.emplace_back(MPIACCEL_CHECK_HDF5(H5Dcreate2(
        f.rng_group, std::to_string(r).c_str(), H5T_STD_U8LE, space, lcpl, dcpl, H5P_DEFAULT)));
  }
}

// Every dataset is allocated once phase 3 is done (ALLOC_TIME_EARLY): rank 0
// reserves the file's blocks in one piece before the ranks write into it, so
// the file is contiguous on the disk, and a full disk fails here, before any
// write.
void reserve_file_blocks(const FileObjects& f, const WriteInput& in) {
  int64_t end = 0;
  for (const auto& d : f.datasets) {
    const haddr_t base = H5Dget_offset(d.dataset);  // local query
    if (base != HADDR_UNDEF)
      end = std::max(end, static_cast<int64_t>(base + H5Dget_storage_size(d.dataset)));
  }
  never_world_writable(in.tmp_path);
  preallocate_file(in.tmp_path, end);
}

struct RowsWritten {
  std::unique_ptr<RawWriter> raw;        // open until the sync; null if it failed to open
  std::map<std::string, uint32_t> crcs;  // by tensor name
};

// This rank's rows of every tensor, written by RawWriter at the addresses
// HDF5 allocated (see write_file), with their CRC32C.
RowsWritten write_tensor_rows(CollectivePhases& phases, const FileObjects& f,
                              const WriteInput& in) {
  struct Piece {
    const LocalShard* shard;
    int64_t offset;
  };
  std::vector<Piece> pieces;
  for (const auto& d : f.datasets)
    if (d.shard->bytes > 0 && d.shard->tensor->row_count > 0)
      phases.record([&] { pieces.push_back({d.shard, rows_offset(d)}); });
  RowsWritten out;
  if (!phases.ok()) return out;
  phases.record([&] {
    // Every rank opens it, also one without rows: it syncs the file below.
    out.raw = std::make_unique<RawWriter>(in.tmp_path);
    for (const auto& p : pieces) {
      try {
        out.crcs[p.shard->tensor->name] = out.raw->write(
            p.shard->host.data_ptr(), p.shard->tensor->row_count * p.shard->row_bytes, p.offset);
        if (&p == &pieces.front()) crash_point("data-write");
      } catch (const Error& e) {
        MPIACCEL_THROW("writing tensor " + p.shard->tensor->name + " failed: " + e.message());
      }
    }
  });
  return out;
}

// This rank's records with their CRCs (0 for shards without bytes).
std::vector<ShardRecord> records_with_crcs(const WriteInput& in,
                                           const std::map<std::string, uint32_t>& crcs) {
  std::vector<ShardRecord> records = in.my_records;
  for (auto& r : records) {
    auto it = crcs.find(r.name);
    r.crc32c = it == crcs.end() ? 0 : it->second;
  }
  return records;
}

// The shard table (each rank writes its own records at the rows the plan gave
// them: nothing is gathered), its index, the config, trainer values, RNG.
void write_small_datasets(CollectivePhases& phases, const FileObjects& f, const WriteInput& in,
                          const std::vector<ShardRecord>& records) {
  const bool rank0 = in.rank == 0;
  H5Id collective = make_transfer_list(true);
  H5Id independent = make_transfer_list(false);
  phases.record([&] {
    write_shard_table(f.meta, records, in.table.positions, in.table.total, in.name_length, collective);
  });
  phases.record([&] { write_shard_index(f.meta, in.table.counts, rank0, collective); });
  phases.record([&] { write_text_dataset(f.meta, "config", in.plan->config_text, rank0, collective); });
  phases.record([&] {
    // Trainer values too long for attributes become text datasets.
    H5Id trainer(MPIACCEL_CHECK_HDF5(H5Gopen2(f.file, "trainer", H5P_DEFAULT)));
    for (const auto& [key, value] : in.plan->trainer) {
      if (value.size() <= kMaxAttributeText)
        write_string_attribute(trainer, key, value);  // collective
      else
        write_text_dataset(trainer, key, value, rank0, collective);  // collective
    }
  });
  if (!in.rng_state->empty())
    phases.record([&] {
      MPIACCEL_CHECK_HDF5(H5Dwrite(f.rng_datasets[static_cast<size_t>(in.rank)], H5T_NATIVE_UCHAR,
                                   H5S_ALL, H5S_ALL, independent, in.rng_state->data()));  // independent
    });
}

std::string timing_text(const RawWriter::Stats& st, bool direct, double data_seconds,
                        double meta_seconds) {
  char text[320];
  std::snprintf(text, sizeof text,
                "tensor data %.3f s (%s, %.0f MiB O_DIRECT, %.0f MiB buffered; copy+CRC %.3f, "
                "waiting for the disk %.3f), shard table + small datasets + close %.3f, "
                "fdatasync %.3f",
                data_seconds, direct ? "O_DIRECT open" : "no O_DIRECT",
                st.direct_bytes / 1048576.0, st.buffered_bytes / 1048576.0,
                st.copy_crc_seconds, st.wait_seconds, meta_seconds, st.sync_seconds);
  return text;
}

// What a failed write's message starts with. HDF5's stack does not carry
// errno; say the likely cause when it is so.
std::string failure_context(const WriteInput& in) {
  const int64_t free_bytes = available_bytes(in.dir);
  return "checkpoint step " + std::to_string(in.step) + ": writing " + in.tmp_path + " failed" +
         (free_bytes >= 0 && free_bytes < (1 << 20)
              ? " (No space left on device: " + std::to_string(free_bytes) + " bytes free)"
              : "") +
         ": ";
}

}  // namespace

void write_file(Communicator& comm, const WriteInput& in) {
  CollectivePhases phases(comm);
  FileObjects f(create_file(phases, in));
  phases.record([&] { create_objects(f, in); });  // phase 3
  if (in.rank == 0 && phases.ok()) phases.record([&] { reserve_file_blocks(f, in); });
  phases.agree();
  phases.lap("metadata");

  // Phase 4. From here on an error is recorded and the remaining collective
  // calls are still made. While HDF5 holds the file open, every rank writes
  // its tensor rows itself at the addresses HDF5 allocated, mostly with
  // O_DIRECT (RawWriter), computing each shard's CRC32C on the staged copy.
  // The bytes are those H5Dwrite would write (memory type = file type, no
  // conversion); HDF5 never touches these ranges (FILL_TIME_NEVER, and its
  // metadata lives elsewhere). Then every rank writes its records of the
  // shard table with their CRCs, HDF5 writes the small datasets and the
  // metadata and closes the file, and every rank syncs once.
  RowsWritten rows = write_tensor_rows(phases, f, in);
  const double data_seconds = phases.lap("tensor data");
  write_small_datasets(phases, f, in, records_with_crcs(in, rows.crcs));
  f.close_objects();
  // No H5Fflush: the close writes the metadata, and the one sync below makes
  // it durable together with the tensor data.
  phases.record([&] {
    const herr_t rc = H5Fclose(f.file.release());  // collective
    MPIACCEL_CHECK(rc >= 0, "closing " + in.tmp_path + " failed: " + hdf5_error_stack());
  });
  const double meta_seconds = phases.lap("close");
  // Every rank syncs, also one without rows: on a parallel file system each
  // node's page cache holds its own share of the metadata writes.
  const bool direct = rows.raw && rows.raw->direct();
  if (phases.ok() && rows.raw) phases.record([&] { rows.raw->sync_and_close(); });
  if (in.timing && rows.raw)
    *in.timing = timing_text(rows.raw->stats(), direct, data_seconds, meta_seconds);
  phases.agree(phases.ok() ? "" : failure_context(in));
}

}  // namespace mpiaccel::detail
