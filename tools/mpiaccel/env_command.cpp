// `mpiaccel env`: versions, build options, and the launcher and rank
// environment as every rank sees it (like `accelerate env`).

#include <boost/version.hpp>
#include <hdf5.h>
#include <torch/version.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config_files.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/mesh.hpp"
#include "mpiaccel/program.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/version.hpp"

namespace mpiaccel::tool {
namespace {

// The file train, launch and run_main programs read when given no --config.
std::string default_config_description() {
  const std::string path = default_config_path();
  if (path.empty()) return "none (neither XDG_CONFIG_HOME nor HOME is set)";
  return path + (std::ifstream(path).good() ? " (read when no --config is given)"
                                            : " (absent: the built-in defaults without --config)");
}

std::string env_or(const char* name, const char* fallback = "-") {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  std::string text = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
#ifdef H5_HAVE_PARALLEL
  text += " (parallel)";
#else
  text += " (serial)";
#endif
  return text;
}

std::string boost_version() {
  return std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) +
         "." + std::to_string(BOOST_VERSION % 100);
}

// One line per rank: what the launcher told it and what MPI says.
std::string device_or_reason(const Runtime& rt) {
  try {
    return rt.device().device;
  } catch (const Error& e) {
    return "error: " + e.message();
  }
}

// This rank's coordinates in `shape` (row-major, as Mesh places ranks).
std::string mesh_coordinates(const MeshShape& shape, int64_t rank) {
  if (shape.dims.empty()) return "-";
  std::string text;
  for (size_t i = shape.dims.size(); i-- > 0;) {
    text = std::to_string(rank % shape.dims[i].size) + (text.empty() ? "" : ",") + text;
    rank /= shape.dims[i].size;
  }
  return "(" + text + ")";
}

std::string rank_row(const Runtime& rt, const MeshShape& shape) {
  const auto& launch = rt.launch();
  char row[512];
  std::snprintf(row, sizeof(row), "%5d  %-16s %5d/%-5d %4d/%-4d %-9s %-8s %-12s %-12s %s", rt.rank(),
                rt.host().c_str(), rt.local_rank(), rt.local_size(), rt.node_rank(), rt.node_count(),
                launcher_name(launch.launcher), device_or_reason(rt).c_str(),
                env_or("OMP_NUM_THREADS").c_str(), env_or("CUDA_VISIBLE_DEVICES").c_str(),
                mesh_coordinates(shape, rt.rank()).c_str());
  return row;
}

// The mesh the job's config asks for at this world size (the config train
// would read: --config files and overrides, else the default config), or why
// there is none. Collective over `world`.
std::string job_mesh(const std::vector<std::string>& args, Communicator& world, const Runtime& rt,
                     MeshShape* shape) {
  std::vector<std::string> words{"env"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  ProgramArgs parsed = parse_program_args(static_cast<int>(argv.size()), argv.data());
  if (parsed.config_paths.empty() && access(default_config_path().c_str(), R_OK) == 0)
    parsed.config_paths.push_back(default_config_path());
  const int64_t ranks_per_node = uniform_ranks_per_node(world, rt.local_size());
  try {
    const Config config = load_config(world, parsed.config_paths, parsed.overrides);
    *shape = mesh_shape_of(config, world.size(), ranks_per_node);
    return shape->describe();
  } catch (const Error& e) {
    return "none: " + e.message();
  } catch (const std::exception& e) {
    return std::string("none: ") + e.what();
  }
}

int run_env(const std::vector<std::string>& args, int* argc, char*** argv) {
  for (const std::string& a : args)
    if (a.rfind("-", 0) == 0 && a != "--config" && a != "-c" && a.rfind("--config=", 0) != 0)
      throw UsageError("unexpected argument '" + a + "'");
  Runtime rt(argc, argv);
  auto world = make_mpi_world(rt, std::chrono::seconds(60));
  MeshShape shape;
  const std::string mesh = job_mesh(args, *world, rt, &shape);
  auto rows = world->gather_bytes(rank_row(rt, shape), 0);
  if (!rt.is_main_process()) return 0;

  std::ostringstream out;
  out << "mpiaccel " << version() << "\n\n"
      << "versions\n"
      << "  LibTorch        " << TORCH_VERSION << ", " << (MPIACCEL_TORCH_CUDA ? "with" : "without")
      << " CUDA  (" << MPIACCEL_TORCH_DIR << ")\n"
      << "  MPI             " << rt.mpi_library_version() << "\n"
      << "  HDF5            " << hdf5_version() << "\n"
      << "  NCCL            " << (nccl_available() ? nccl_version() : std::string("not built")) << "\n"
      << "  inih            " << MPIACCEL_INIH_VERSION << "\n"
      << "  yaml-cpp        " << MPIACCEL_YAMLCPP_VERSION << "\n"
      << "  Boost           " << boost_version() << "\n\n"
      << "build\n"
      << "  build type      " << MPIACCEL_BUILD_TYPE << "\n"
      << "  compiler        " << MPIACCEL_CXX_COMPILER << "\n"
      << "  NCCL backend    " << (MPIACCEL_NCCL_BUILT ? "ON" : "OFF") << "\n\n"
      << "job\n"
      << "  world size      " << rt.world_size() << " on " << rt.node_count() << " node(s)\n"
      << "  launcher        " << launcher_name(rt.launch().launcher) << "\n"
      << "  Slurm job       " << env_or("SLURM_JOB_ID") << " step " << env_or("SLURM_STEP_ID") << "\n"
      << "  OMPI_MCA_fcoll  " << env_or("OMPI_MCA_fcoll") << "\n"
      << "  default config  " << default_config_description() << "\n"
      << "  mesh            " << mesh << "\n\n"
      << " rank  host             local       node      launcher  device   OMP_THREADS  CUDA_VISIBLE "
         "mesh at\n";
  for (const auto& row : rows) out << row << "\n";
  std::fputs(out.str().c_str(), stdout);
  return 0;
}

}  // namespace

extern const Command kEnvCommand = {
    "env", "versions, build options and the rank environment",
    "usage: mpiaccel env [--config FILE]... [section.key=value ...]\n"
    "       mpirun -np N mpiaccel env [--config FILE]...\n\n"
    "Prints the versions of mpiaccel, LibTorch, the MPI library, HDF5 (and whether it is\n"
    "parallel), NCCL, inih and Boost; the build options; the device mesh the config (as\n"
    "train reads it: the files, else the default config) makes at this world size; and,\n"
    "gathered on rank 0, one row per rank: host, local rank, node, launcher, device,\n"
    "OMP_NUM_THREADS, CUDA_VISIBLE_DEVICES, its coordinates in the mesh.\n",
    run_env};

}  // namespace mpiaccel::tool
