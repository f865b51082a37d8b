#pragma once
// A safe main() for a training program under mpirun or srun:
//
//   int main(int argc, char** argv) {
//     return mpiaccel::run_main(argc, argv, [](mpiaccel::Accelerator& acc) {
//       ... your model, data and loop ...
//       return 0;
//     });
//   }
//
//   mpirun -np 4 ./train --config job.ini train.max_steps=500 optimizer.lr=1e-3
//
// run_main starts MPI (mpiaccel::Runtime), reads the config files on rank 0
// and broadcasts them (every rank parses the same bytes), applies the
// `section.key=value` overrides of the command line, builds the Accelerator
// and calls your function. Its failure contract: an exception that every
// rank throws (a bad config, a missing file found by all) is printed once,
// by rank 0, as one line `PROGRAM: <why>`, and the program exits 1; an
// exception on some ranks only is printed by each of them with its rank and
// host, and ends the whole job (MPI_Abort, status 1) within seconds, so that
// no other rank waits for it. A wrong command line prints the usage and
// exits 2.

#include <functional>
#include <string>
#include <vector>

namespace mpiaccel {

class Accelerator;

/// The command line of a program under run_main.
struct ProgramArgs {
  std::string program;                 ///< argv[0]'s file name
  /// Each --config FILE, in order (any format of config_files.hpp); none:
  /// the user's default config (default_config_path()) if it exists, else
  /// the defaults.
  std::vector<std::string> config_paths;
  std::vector<std::string> overrides;  ///< section.key=value
  std::vector<std::string> rest;       ///< everything after `--`, for the program itself
};

/// Reads `--config FILE` (or --config=FILE, -c FILE; repeatable), `section.key=value`
/// overrides and, after `--`, the program's own arguments. Throws
/// std::invalid_argument for anything else.
ProgramArgs parse_program_args(int argc, char** argv);

struct MainOptions {
  /// Refuse to run without --config or a default config (`mpiaccel train` does).
  bool config_required = false;
  /// Name used in messages; "" = argv[0]'s file name.
  std::string name;
  /// Printed after a command-line error.
  std::string usage;
  /// The config's text when no --config is given (a program whose config
  /// comes from elsewhere: `mpiaccel generate` takes a checkpoint's); its
  /// overrides apply on top. Empty: the defaults.
  std::string config_text;
  /// Without --config (and config_text), read the file `mpiaccel config`
  /// wrote ($XDG_CONFIG_HOME/mpiaccel/default.ini), when there is one.
  /// `mpiaccel generate --model DIR` does not: the directory is the config.
  bool read_default_config = true;
};

/// Runs `body` as described above and returns the exit status to return
/// from main(): body's result, 1 after a failure, 2 after a usage error.
int run_main(int argc, char** argv, const std::function<int(Accelerator&)>& body,
             const MainOptions& options = {});
/// The same, with the parsed command line (for `rest`).
int run_main(int argc, char** argv,
             const std::function<int(Accelerator&, const ProgramArgs&)>& body,
             const MainOptions& options = {});

}  // namespace mpiaccel
