// ctest: links mpiaccel; np 1 2 3; timeout 120
// Bad checkpoints fail loudly and alike on every rank, and damage nothing:
// flipped bytes inside a tensor, a truncated file, a foreign HDF5 file, a file
// that is not HDF5, a checkpoint of a different model, a missing directory,
// a directory without `latest`, a damaged or missing shard index, shapes and
// shard records that claim petabytes or negative rows, dtype attributes that
// disagree with their data, attributes holding many values, shard records of
// a tensor without data, and prune and tmp cleanup next to files of the
// user's. (A full disk and a
// killed rank are process level: tests/scripts/test_ckpt_full_disk.sh,
// test_ckpt_kill.sh.)
#define BOOST_TEST_MODULE checkpoint_faults
#include "support/mpi_test.hpp"
#include "support/old_checkpoint.hpp"

#include <ATen/ATen.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "mpiaccel/checkpoint.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/state.hpp"
#include "support/checkpoint_setup.hpp"

namespace fs = std::filesystem;
using namespace mpiaccel;
using namespace mpiaccel::test;

namespace {

at::Tensor full_w() { return at::arange(48, at::kFloat).reshape({12, 4}) * 0.5; }
at::Tensor full_b() { return at::arange(12, at::kLong); }

ShardedStateDict state_of_model() {
  ShardedStateDict state;
  state.tensors = {shard_of("model/w", full_w()), shard_of("model/b", full_b())};
  return state;
}

ShardedStateDict full_targets() {
  ShardedStateDict targets;
  targets.tensors = {target_of("model/w", {12, 4}, at::kFloat), target_of("model/b", {12}, at::kLong)};
  return targets;
}

// The same message on every rank, and it contains every needle.
bool fails_everywhere_with(const std::string& message, std::initializer_list<const char*> needles) {
  BOOST_TEST_MESSAGE("rank " << world().rank() << ": " << message);
  bool ok = !message.empty();
  for (const char* n : needles) ok &= message.find(n) != std::string::npos;
  return same_on_every_rank(message) && ok;
}

// One shared checkpoint per test case, step 5.
std::string save_one(CheckpointDir& dir) { return dir.ckpt.save(state_of_model(), 5, meta_at(5)); }

void copy_file(const std::string& from, const std::string& to) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

}  // namespace

BOOST_AUTO_TEST_CASE(flipped_bytes_in_a_tensor_are_caught_by_load_and_verify) {
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  const std::string damaged = dir.path + "/damaged.h5";
  std::vector<std::string> problems;
  if (world().rank() == 0) {
    copy_file(path, damaged);
    // Find where /model/w's data lies (contiguous layout), flip one byte in row 7.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    hid_t file = H5Fopen(damaged.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dset = H5Dopen2(file, "/model/w", H5P_DEFAULT);
    const haddr_t offset = H5Dget_offset(dset);
    H5Dclose(dset);
    H5Fclose(file);
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset + 7 * 16 + 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(offset + 7 * 16 + 2));
    f.write(&c, 1);
    f.close();
    problems = CheckpointReader(damaged).verify();
  }
  MPIACCEL_CHECK_ALL(world().rank() != 0 ||
                     (problems.size() == 1 && problems[0].find("model/w") == 0 &&
                      problems[0].find("damaged") != std::string::npos));
  ShardedStateDict targets = full_targets();
  const std::string message = error_of([&] { dir.ckpt.load(damaged, targets); });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(message, {"damaged", "model/w", "checksum"}));
  // A rank whose rows avoid the damaged shard still agrees to fail (above);
  // the original file is intact and loads.
  ShardedStateDict good = full_targets();
  dir.ckpt.load(dir.path, good);
  MPIACCEL_CHECK_ALL(at::equal(good.tensors[0].local, full_w()) &&
                     at::equal(good.tensors[1].local, full_b()));
  MPIACCEL_CHECK_ALL(world().rank() != 0 || CheckpointReader(path).verify().empty());
}

BOOST_AUTO_TEST_CASE(truncated_file) {
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  const std::string cut = dir.path + "/cut.h5";
  if (world().rank() == 0) {
    copy_file(path, cut);
    fs::resize_file(cut, fs::file_size(cut) / 2);
  }
  world().barrier();
  ShardedStateDict targets = full_targets();
  const std::string message = error_of([&] { dir.ckpt.load(cut, targets); });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(message, {"cannot open checkpoint", "cut.h5", "truncated"}));
  // Cut inside the superblock: not even an HDF5 signature check passes.
  if (world().rank() == 0) fs::resize_file(cut, 4);
  world().barrier();
  const std::string tiny = error_of([&] { dir.ckpt.load(cut, targets); });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(tiny, {"not an HDF5 file"}));
}

BOOST_AUTO_TEST_CASE(foreign_hdf5_and_non_hdf5_files) {
  CheckpointDir dir("ckpt_faults");
  const std::string foreign = dir.path + "/foreign.h5", text = dir.path + "/notes.txt";
  if (world().rank() == 0) {
    hid_t file = H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[1] = {4};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dset = H5Dcreate2(file, "data", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int values[4] = {1, 2, 3, 4};
    H5Dwrite(dset, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(dset);
    H5Sclose(space);
    H5Fclose(file);
    std::ofstream(text) << "hello\n";
  }
  world().barrier();
  ShardedStateDict targets = full_targets();
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(foreign, targets); }),
                                           {"not an mpiaccel checkpoint", "foreign.h5",
                                            "(format attribute missing)"}));
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(text, targets); }),
                                           {"not an mpiaccel checkpoint", "not an HDF5 file"}));
}

BOOST_AUTO_TEST_CASE(checkpoint_of_a_different_model) {
  CheckpointDir dir("ckpt_faults");
  save_one(dir);
  ShardedStateDict missing;
  missing.tensors.push_back({"model/w", {12, 4}, 0, 12, at::zeros({12, 4}, at::kFloat)});
  missing.tensors.push_back({"model/extra.bias", {3}, 0, 3, at::zeros({3}, at::kFloat)});
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(dir.path, missing); }),
                                           {"has no tensor model/extra.bias", "different model"}));
  ShardedStateDict reshaped;
  reshaped.tensors.push_back({"model/w", {6, 8}, 0, 6, at::zeros({6, 8}, at::kFloat)});
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(dir.path, reshaped); }),
                                           {"model/w", "[12, 4]", "[6, 8]"}));
  // Only the last rank asks for something that is not there: all fail together.
  ShardedStateDict one_rank = full_targets();
  if (world().rank() == world().size() - 1) one_rank.tensors[1].name = "model/c";
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(dir.path, one_rank); }),
                                           {"model/c"}));
  ShardedStateDict wrong_dtype;
  wrong_dtype.tensors.push_back({"model/b", {12}, 0, 12, at::zeros({12}, at::kFloat)});
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(dir.path, wrong_dtype); }),
                                           {"model/b", "int64", "float32"}));
}

BOOST_AUTO_TEST_CASE(missing_directory_and_no_latest) {
  CheckpointDir dir("ckpt_faults");
  ShardedStateDict targets = full_targets();
  MPIACCEL_CHECK_ALL(fails_everywhere_with(
      error_of([&] { dir.ckpt.load(dir.path + "/no/such/dir", targets); }), {"does not exist"}));
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(dir.path, targets); }),
                                           {"no committed checkpoint in", "latest"}));
  // A leftover temporary file is never loaded: `latest` is the only way in.
  if (world().rank() == 0) std::ofstream(dir.path + "/.step_00000009.h5.tmp") << "partial";
  world().barrier();
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(dir.path, targets); }),
                                           {"no committed checkpoint in"}));
  // ... and is removed by the next successful save.
  save_one(dir);
  MPIACCEL_CHECK_ALL(!fs::exists(dir.path + "/.step_00000009.h5.tmp"));
}

namespace {

// A copy of `path` changed by `edit` (an HDF5 file opened read-write) on rank 0.
std::string edited_copy(const std::string& path, const std::string& copy,
                        const std::function<void(hid_t)>& edit) {
  if (world().rank() == 0) {
    copy_file(path, copy);
    hid_t file = H5Fopen(copy.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    edit(file);
    H5Fclose(file);
  }
  world().barrier();
  return copy;
}

}  // namespace

BOOST_AUTO_TEST_CASE(shard_index_written_and_files_without_it_still_load) {
  // Saves write /meta/shard_index and the table sorted by tensor; a file of
  // an earlier version (no index) is read whole by rank 0, as before.
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  MPIACCEL_CHECK_ALL(H5Fis_hdf5(path.c_str()) > 0);
  const std::string old = edited_copy(path, dir.path + "/no_index.h5", [](hid_t file) {
    BOOST_REQUIRE(H5Lexists(file, "/meta/shard_index", H5P_DEFAULT) > 0);
    mpiaccel::test::make_format_version_1(file);
  });
  for (const std::string& file : {path, old}) {
    ShardedStateDict targets = full_targets();
    dir.ckpt.load(file, targets);
    MPIACCEL_CHECK_ALL(at::equal(targets.tensors[0].local, full_w()) &&
                       at::equal(targets.tensors[1].local, full_b()));
    ShardedStateDict mine = state_of_model();
    for (auto& t : mine.tensors) t.local.zero_();
    dir.ckpt.load(file, mine);
    MPIACCEL_CHECK_ALL(at::equal(mine.tensors[0].local, state_of_model().tensors[0].local));
  }
}

BOOST_AUTO_TEST_CASE(damaged_shard_index_is_refused) {
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  const auto rewrite = [](int64_t row0_count) {
    return [row0_count](hid_t file) {
      hid_t dset = H5Dopen2(file, "/meta/shard_index", H5P_DEFAULT);
      int64_t pairs[4] = {0, 0, 0, 0};
      H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pairs);
      pairs[1] = row0_count;
      H5Dwrite(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pairs);
      H5Dclose(dset);
    };
  };
  for (int64_t count : {int64_t{0}, int64_t{-5}, int64_t{1} << 60}) {
    BOOST_TEST_CONTEXT("count " << count) {
      const std::string bad = edited_copy(path, dir.path + "/bad_index.h5", rewrite(count));
      ShardedStateDict targets = full_targets();
      const std::string message = error_of([&] { dir.ckpt.load(bad, targets); });
      MPIACCEL_CHECK_ALL(fails_everywhere_with(message, {"bad_index.h5", "shard_index", "damaged"}));
    }
  }
  // A row count that still adds up but splits the tensors wrongly: the owner
  // of a tensor finds another tensor's rows in its slice of the table (with
  // one rank, tensor 0 has one record and the index says 0: refused above).
  if (world().size() > 1) {
    const std::string bad = edited_copy(path, dir.path + "/shifted.h5", [](hid_t file) {
      hid_t dset = H5Dopen2(file, "/meta/shard_index", H5P_DEFAULT);
      int64_t pairs[4] = {0, 0, 0, 0};
      H5Dread(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pairs);
      pairs[1] -= 1;  // tensor 0 one row shorter, tensor 1 one longer
      pairs[2] -= 1;
      pairs[3] += 1;
      H5Dwrite(dset, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, pairs);
      H5Dclose(dset);
    });
    ShardedStateDict targets = full_targets();
    const std::string message = error_of([&] { dir.ckpt.load(bad, targets); });
    MPIACCEL_CHECK_ALL(fails_everywhere_with(message, {"shifted.h5", "damaged"}));
  }
  MPIACCEL_CHECK_ALL(world().rank() != 0 || CheckpointReader(path).verify().empty());
}

BOOST_AUTO_TEST_CASE(hostile_shapes_and_shard_records_are_refused_before_any_allocation) {
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  // /model/w replaced by a chunked dataset claiming [2^31, 2^31] float32 (2^64 bytes).
  const std::string huge = edited_copy(path, dir.path + "/huge.h5", [](hid_t file) {
    H5Ldelete(file, "/model/w", H5P_DEFAULT);
    const hsize_t dims[2] = {hsize_t{1} << 31, hsize_t{1} << 31}, chunk[2] = {64, 64};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, chunk);
    hid_t dset = H5Dcreate2(file, "/model/w", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 7);
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(dset, "torch_dtype", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, str, "float32");
    for (hid_t id : {attr}) H5Aclose(id);
    H5Sclose(scalar);
    H5Tclose(str);
    H5Dclose(dset);
    H5Pclose(dcpl);
    H5Sclose(space);
  });
  ShardedStateDict targets = full_targets();
  std::string message = error_of([&] { dir.ckpt.load(huge, targets); });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(message, {"huge.h5", "model/w", "claims shape", "hostile"}));
  if (world().rank() == 0) {
    const std::string tool = error_of([&] { CheckpointReader reader(huge); });
    BOOST_TEST(tool.find("claims shape [2147483648, 2147483648]") != std::string::npos, tool);
  }
  // A shard record claiming 2^62 rows, and one starting at a negative row.
  for (const int64_t lie : {int64_t{1} << 62, int64_t{-3}}) {
    const std::string bad = edited_copy(path, dir.path + "/rows.h5", [lie](hid_t file) {
      hid_t dset = H5Dopen2(file, "/meta/shards", H5P_DEFAULT);
      const char* field = lie < 0 ? "first_row" : "rows";
      hid_t mtype = H5Tcreate(H5T_COMPOUND, sizeof(int64_t));
      H5Tinsert(mtype, field, 0, H5T_NATIVE_INT64);
      hid_t space = H5Dget_space(dset);
      std::vector<int64_t> values(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
      H5Dread(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      values[0] = lie;
      H5Dwrite(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      H5Sclose(space);
      H5Tclose(mtype);
      H5Dclose(dset);
    });
    ShardedStateDict t = full_targets();
    message = error_of([&] { dir.ckpt.load(bad, t); });
    MPIACCEL_CHECK_ALL(fails_everywhere_with(message, {"rows.h5", "a shard claims rows", "damaged"}));
    if (world().rank() == 0) {
      const std::string tool = error_of([&] { CheckpointReader reader(bad); });
      BOOST_TEST(tool.find("a shard claims rows") != std::string::npos, tool);
    }
  }
}

namespace {

// Replaces the torch_dtype attribute of dataset `name` by `value`, stored as
// a fixed-length string, or as an int64 when `as_string` is false.
void set_dtype_attribute(hid_t file, const char* name, const std::string& value, bool as_string) {
  hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  H5Adelete(dset, "torch_dtype");
  hid_t scalar = H5Screate(H5S_SCALAR);
  hid_t type = as_string ? H5Tcopy(H5T_C_S1) : H5Tcopy(H5T_STD_I64LE);
  if (as_string) H5Tset_size(type, value.size());
  hid_t attr = H5Acreate2(dset, "torch_dtype", type, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const int64_t number = 7;
  H5Awrite(attr, type, as_string ? static_cast<const void*>(value.data()) : &number);
  H5Aclose(attr);
  H5Tclose(type);
  H5Sclose(scalar);
  H5Dclose(dset);
}

}  // namespace

BOOST_AUTO_TEST_CASE(dtype_attributes_that_disagree_with_their_dataset_are_refused) {
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  struct Lie {
    const char* file;
    const char* dataset;
    std::string dtype;
    bool as_string;
    std::initializer_list<const char*> needles;
  };
  const Lie lies[] = {
      // float32 bytes announced as float64 (would read twice the bytes)
      {"wide.h5", "/model/w", "float64", true, {"model/w", "HDF5 type does not hold float64"}},
      // int64 bytes announced as float32 (same row count, other meaning)
      {"kind.h5", "/model/b", "float32", true, {"model/b", "HDF5 type does not hold float32"}},
      {"unknown.h5", "/model/w", "complex128", true, {"model/w", "unknown torch_dtype 'complex128'"}},
      {"number.h5", "/model/w", "", false, {"model/w", "torch_dtype"}},
  };
  for (const Lie& lie : lies) {
    const std::string bad = edited_copy(path, dir.path + "/" + lie.file, [&](hid_t file) {
      set_dtype_attribute(file, lie.dataset, lie.dtype, lie.as_string);
    });
    ShardedStateDict targets = full_targets();
    std::vector<const char*> needles(lie.needles);
    needles.push_back(lie.file);
    const std::string message = error_of([&] { dir.ckpt.load(bad, targets); });
    bool ok = fails_everywhere_with(message, {});
    for (const char* n : needles) ok &= message.find(n) != std::string::npos;
    MPIACCEL_CHECK_ALL(ok);
    if (world().rank() == 0) {
      const std::string tool = error_of([&] { CheckpointReader reader(bad); });
      BOOST_TEST(tool.find(needles[1]) != std::string::npos, tool);
    }
  }
}

BOOST_AUTO_TEST_CASE(shard_records_naming_a_tensor_without_data_are_refused) {
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  // /meta/shards lists model/b, whose dataset is gone; with the shard index
  // (the load's path) and without it (the old reader, the ckpt tool).
  for (const bool with_index : {true, false}) {
    const std::string bad = edited_copy(path, dir.path + "/ghost.h5", [with_index](hid_t file) {
      H5Ldelete(file, "/model/b", H5P_DEFAULT);
      if (!with_index) mpiaccel::test::make_format_version_1(file);
    });
    ShardedStateDict targets = full_targets();
    const std::string message = error_of([&] { dir.ckpt.load(bad, targets); });
    MPIACCEL_CHECK_ALL(fails_everywhere_with(
        message, {"ghost.h5", "tensor model/b is listed in /meta/shards but has no dataset"}));
    if (world().rank() == 0) {
      const std::string tool = error_of([&] { CheckpointReader reader(bad); });
      BOOST_TEST(tool.find("has no dataset") != std::string::npos, tool);
    }
  }
  // A load that does not ask for the missing tensor still refuses the file:
  // a checkpoint is whole or it is not loaded.
  const std::string bad = dir.path + "/ghost.h5";
  ShardedStateDict only_w;
  only_w.tensors.push_back(full_targets().tensors[0]);
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(bad, only_w); }),
                                           {"has no dataset"}));
}

BOOST_AUTO_TEST_CASE(prune_and_tmp_cleanup_touch_only_files_a_save_created) {
  CheckpointDir dir("ckpt_faults", /*keep_last=*/1, "/run");
  const std::string run = dir.path, outside = dir.root.path + "/outside.h5";
  // Files of the user's beside the checkpoints, with names close to ours,
  // links leading out of the directory, and one stale tmp of a crashed save.
  const std::vector<std::string> decoys = {
      "step_5.h5", "step_00000001.h5.bak", ".step_notes.h5.tmp", "notes.h5.tmp",
      "step_999999999999999999999999.h5", "step_0000000x.h5"};
  const std::vector<std::string> links = {"step_00000002.h5", ".step_00000003.h5.tmp"};
  if (world().rank() == 0) {
    fs::create_directories(run + "/step_00000004.h5");  // a directory
    std::ofstream(outside) << "precious";
    for (const auto& name : decoys) std::ofstream(run + "/" + name) << name;
    for (const auto& name : links) fs::create_symlink(outside, run + "/" + name);
    std::ofstream(run + "/.step_00000007.h5.tmp") << "partial";
  }
  world().barrier();
  for (int64_t step : {10, 20, 30}) dir.ckpt.save(state_of_model(), step, meta_at(step));
  bool ok = Checkpointer::list(run) == std::vector<std::string>{run + "/step_00000030.h5"};
  ok &= !fs::exists(run + "/.step_00000007.h5.tmp");  // ours: removed
  for (const auto& name : decoys) {
    std::ifstream in(run + "/" + name);
    std::string text;
    std::getline(in, text);
    ok &= text == name;
  }
  for (const auto& name : links) ok &= fs::is_symlink(run + "/" + name);
  ok &= fs::is_directory(run + "/step_00000004.h5");
  std::ifstream precious(outside);
  std::string text;
  std::getline(precious, text);
  ok &= text == "precious";
  MPIACCEL_CHECK_ALL(ok);
}

BOOST_AUTO_TEST_CASE(attributes_holding_many_values_are_refused_before_they_are_read) {
  // A value read into room for one (the step, a dtype name) that the file
  // gives 1,000 elements: refused by its dataspace, nothing read past it.
  CheckpointDir dir("ckpt_faults");
  const std::string path = save_one(dir);
  const std::string bad = edited_copy(path, dir.path + "/many.h5", [](hid_t file) {
    const hsize_t dims[1] = {1000};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    std::vector<int64_t> steps(1000, 5);
    H5Adelete(file, "step");
    hid_t attr = H5Acreate2(file, "step", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, H5T_NATIVE_INT64, steps.data());
    H5Aclose(attr);
    H5Sclose(space);
  });
  ShardedStateDict targets = full_targets();
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(bad, targets); }),
                                           {"many.h5", "attribute 'step' of /",
                                            "holds 1000 values where one is expected"}));
  const std::string names = edited_copy(path, dir.path + "/names.h5", [](hid_t file) {
    const hsize_t dims[1] = {64};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 7);
    std::string values(64 * 7, 'x');
    hid_t dset = H5Dopen2(file, "/model/w", H5P_DEFAULT);
    H5Adelete(dset, "torch_dtype");
    hid_t attr = H5Acreate2(dset, "torch_dtype", type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, type, values.data());
    H5Aclose(attr);
    H5Dclose(dset);
    H5Tclose(type);
    H5Sclose(space);
  });
  MPIACCEL_CHECK_ALL(fails_everywhere_with(error_of([&] { dir.ckpt.load(names, targets); }),
                                           {"names.h5", "attribute 'torch_dtype' of /model/w",
                                            "holds 64 values"}));
}
