// `mpiaccel train --config F [section.key=value ...]`: the built-in trainer,
// run under mpirun or srun.

#include <chrono>
#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/comm.hpp"
#include "mpiaccel/config_io.hpp"
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

int run_train(const std::vector<std::string>& args, int* argc, char*** argv) {
  auto parsed = parse_train_arguments(args);
  Runtime runtime(argc, argv);
  Config config;
  {
    // Rank 0 reads the file; every rank parses the same bytes.
    auto bootstrap = make_mpi_world(runtime, std::chrono::seconds(120));
    config = load_config(*bootstrap, parsed.config_path, parsed.overrides);
  }
  Accelerator accelerator(runtime, std::move(config));
  auto result = train(accelerator);
  return result.exit_status;
}

}  // namespace

extern const Command kTrainCommand = {
    "train", "train the configured model (run under mpirun/srun)",
    "usage: mpirun -np N mpiaccel train --config FILE [section.key=value ...]\n\n"
    "Trains the model of [train] model on [train] dataset with the strategy of\n"
    "[distributed] strategy. Overrides set any config key, e.g. train.max_steps=50.\n"
    "Rank 0 prints progress; metrics go to [logging] metrics_file (JSONL).\n"
    "Exit status: 0 finished, 1 failed, 2 usage error.\n",
    run_train};

}  // namespace mpiaccel::tool
