// run_main: MPI, the config read on rank 0, the Accelerator, and the failure
// contract of include/mpiaccel/program.hpp.

#include "mpiaccel/program.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>

#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config_files.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/trainer.hpp"
#include "trainer/pretrained_config.hpp"

namespace mpiaccel {
namespace {

std::string file_name(const char* path) {
  const std::string p = path ? path : "program";
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// No --config: the file `mpiaccel config` wrote, when there is one (programs
// with a config of their own, options.config_text, do not read it).
std::vector<std::string> user_default_config() {
  const std::string path = default_config_path();
  if (path.empty() || access(path.c_str(), R_OK) != 0) return {};
  return {path};
}

// Before MPI starts, the launcher's environment says which rank this is;
// only its rank 0 prints a command-line error that every rank finds.
bool launched_as_rank_zero() { return LaunchEnvironment::from_process().rank <= 0; }

// A failure every rank shares (a bad config, a missing dataset, an error
// agreed through all_ok) is reported once, by rank 0, and the job exits 1. A
// failure of some ranks only is reported by each of them and brings the job
// down, so the healthy ranks never wait for the failed one.
int report_failure(Runtime& runtime, const std::string& name, const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  const std::string why = error ? error->message() : e.what();
  if (runtime.all_ranks_failing(std::chrono::seconds(10))) {
    if (runtime.is_main_process()) std::fprintf(stderr, "%s: %s\n", name.c_str(), why.c_str());
    return kExitFailed;
  }
  fatal(name + " failed on this rank: " + why);
}

}  // namespace

ProgramArgs parse_program_args(int argc, char** argv) {
  ProgramArgs out;
  out.program = file_name(argc > 0 ? argv[0] : nullptr);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      out.rest.assign(argv + i + 1, argv + argc);
      break;
    }
    if (a == "--config" || a == "-c") {
      if (i + 1 >= argc) throw std::invalid_argument("--config needs a file");
      out.config_paths.push_back(argv[++i]);
    } else if (a.rfind("--config=", 0) == 0) {
      out.config_paths.push_back(a.substr(9));
    } else if (a.find('=') != std::string::npos && a[0] != '-') {
      out.overrides.push_back(a);
    } else {
      throw std::invalid_argument("unexpected argument '" + a +
                                  "' (overrides are section.key=value; the program's own "
                                  "arguments go after --)");
    }
  }
  return out;
}

int run_main(int argc, char** argv, const std::function<int(Accelerator&, const ProgramArgs&)>& body,
             const MainOptions& options) {
  ProgramArgs args;
  const std::string name = options.name.empty() ? file_name(argc > 0 ? argv[0] : nullptr) : options.name;
  try {
    args = parse_program_args(argc, argv);
    if (args.config_paths.empty() && options.config_text.empty() && options.read_default_config)
      args.config_paths = user_default_config();
    if (options.config_required && args.config_paths.empty())
      throw std::invalid_argument("--config FILE is required (or write a default config with `mpiaccel config`)");
  } catch (const std::invalid_argument& e) {
    if (launched_as_rank_zero()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
      if (!options.usage.empty()) std::fprintf(stderr, "%s", options.usage.c_str());
    }
    return kExitUsage;
  }
  Runtime runtime(&argc, &argv);
  try {
    ResolvedConfig resolved;
    std::string pretrained;
    {
      // Rank 0 reads the files; every rank parses the same bytes.
      auto bootstrap = make_mpi_world(runtime, std::chrono::seconds(120));
      if (!args.config_paths.empty()) {
        resolved = load_resolved_config(*bootstrap, args.config_paths, args.overrides);
      } else if (!options.config_text.empty()) {
        // A whole config (a checkpoint's): every key in it is set.
        resolved.config = Config::parse(options.config_text, options.name + " (its config)", args.overrides);
        for (const ConfigKeyInfo& key : config_schema())
          resolved.settings.push_back({key.section + "." + key.key, "", options.name + " (its config)", key.key});
      } else {
        resolved = resolve_config({}, args.overrides);
      }
      pretrained = detail::apply_pretrained_config(*bootstrap, resolved);
    }
    Accelerator accelerator(runtime, std::move(resolved.config));
    // On stderr, with the run's other notices: stdout is the program's (generate's text).
    if (!pretrained.empty() && accelerator.is_main_process()) log_info(pretrained);
    return body(accelerator, args);
  } catch (const std::exception& e) {
    return report_failure(runtime, name, e);
  }
}

int run_main(int argc, char** argv, const std::function<int(Accelerator&)>& body,
             const MainOptions& options) {
  return run_main(argc, argv, [&](Accelerator& acc, const ProgramArgs&) { return body(acc); }, options);
}

}  // namespace mpiaccel
