// `mpiaccel train --config F... [section.key=value ...]`: the built-in trainer,
// run under mpirun or srun.

#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/accelerator.hpp"
#include "mpiaccel/program.hpp"
#include "mpiaccel/trainer.hpp"

namespace mpiaccel::tool {
namespace {

// run_main reads --config and the overrides, starts MPI, reads the config on
// rank 0 and keeps the failure contract (include/mpiaccel/program.hpp).
int run_train(const std::vector<std::string>& args, int* argc, char*** argv) {
  std::vector<char*> program_argv = {(*argv)[0]};
  for (const std::string& a : args) program_argv.push_back(const_cast<char*>(a.c_str()));
  // argv[argc] is a null pointer, as C promises main(): MPI_Init walks to it
  // (under srun, Open MPI joins the whole command line).
  program_argv.push_back(nullptr);
  MainOptions options;
  options.config_required = true;
  options.name = "mpiaccel: train";
  options.usage = "(see `mpiaccel train --help`)\n";
  return run_main(static_cast<int>(program_argv.size()) - 1, program_argv.data(),
                  [](Accelerator& accelerator) { return train(accelerator).exit_status; }, options);
}

}  // namespace

extern const Command kTrainCommand = {
    "train", "train the configured model (run under mpirun/srun)",
    "usage: mpirun -np N mpiaccel train --config FILE... [section.key=value ...]\n\n"
    "Trains the model of [train] model on [train] dataset with the strategy of\n"
    "[distributed] strategy. --config is repeatable and reads INI, Accelerate YAML,\n"
    "DeepSpeed JSON, the Trainer's fsdp_config and TrainingArguments JSON; two files\n"
    "that disagree on a key stop the run (docs/config.md). Without --config: the\n"
    "default config `mpiaccel config` wrote. Overrides set any config key and beat\n"
    "the files, e.g. train.max_steps=50.\n"
    "Rank 0 prints progress; metrics go to [logging] metrics_file (JSONL).\n"
    "Exit status: 0 finished, 1 failed, 2 usage error, 3 pre-empted (SIGUSR1/SIGTERM)\n"
    "after a checkpoint: run again with checkpoint.resume=latest.\n",
    run_train};

}  // namespace mpiaccel::tool
