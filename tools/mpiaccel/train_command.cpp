// `mpiaccel train --config F [section.key=value ...]`: the built-in trainer,
// run under mpirun or srun.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config_io.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/runtime.hpp"
#include "mpiaccel/trainer.hpp"

namespace mpiaccel::tool {
namespace {

struct TrainArguments {
  std::string config_path;
  std::vector<std::string> overrides;
};

TrainArguments parse_train_arguments(const std::vector<std::string>& args) {
  TrainArguments out;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--config" || a == "-c") {
      if (i + 1 >= args.size()) throw UsageError("--config needs a file");
      out.config_path = args[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      out.config_path = a.substr(9);
    } else if (a.find('=') != std::string::npos && a[0] != '-') {
      out.overrides.push_back(a);
    } else {
      throw UsageError("unexpected argument '" + a + "' (overrides are section.key=value)");
    }
  }
  if (out.config_path.empty()) throw UsageError("--config FILE is required");
  return out;
}

// A failure every rank shares (a bad config, a missing dataset, an error
// agreed through all_ok) is reported once, by rank 0, and the job exits 1. A
// failure of some ranks only is reported by each of them and brings the job
// down, so the healthy ranks never wait for the failed one.
int report_failure(Runtime& runtime, const char* command, const std::exception& e) {
  const auto* error = dynamic_cast<const Error*>(&e);
  const std::string why = error ? error->message() : e.what();
  if (runtime.all_ranks_failing(std::chrono::seconds(10))) {
    if (runtime.is_main_process()) std::fprintf(stderr, "mpiaccel: %s: %s\n", command, why.c_str());
    return 1;
  }
  fatal(std::string(command) + " failed on this rank: " + why);
}

int run_train(const std::vector<std::string>& args, int* argc, char*** argv) {
  auto parsed = parse_train_arguments(args);
  Runtime runtime(argc, argv);
  try {
    Config config;
    {
      // Rank 0 reads the file; every rank parses the same bytes.
      auto bootstrap = make_mpi_world(runtime, std::chrono::seconds(120));
      config = load_config(*bootstrap, parsed.config_path, parsed.overrides);
    }
    Accelerator accelerator(runtime, std::move(config));
    return train(accelerator).exit_status;
  } catch (const std::exception& e) {
    return report_failure(runtime, "train", e);
  }
}

}  // namespace

extern const Command kTrainCommand = {
    "train", "train the configured model (run under mpirun/srun)",
    "usage: mpirun -np N mpiaccel train --config FILE [section.key=value ...]\n\n"
    "Trains the model of [train] model on [train] dataset with the strategy of\n"
    "[distributed] strategy. Overrides set any config key, e.g. train.max_steps=50.\n"
    "Rank 0 prints progress; metrics go to [logging] metrics_file (JSONL).\n"
    "Exit status: 0 finished, 1 failed, 2 usage error, 3 pre-empted (SIGUSR1/SIGTERM)\n"
    "after a checkpoint: run again with checkpoint.resume=latest.\n",
    run_train};

}  // namespace mpiaccel::tool
