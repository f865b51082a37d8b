#pragma once
// The subcommands of the `mpiaccel` tool. Each lives in its own file and is
// listed in commands.cpp. Conventions (docs/design.md, "Command line"): errors are one line
// "mpiaccel: <command>: <why>" on stderr; exit 2 for usage errors, 1 for
// failures, 0 for success; every command answers --help.

#include <stdexcept>
#include <string>
#include <vector>

namespace mpiaccel::tool {

/// A wrong command line: main() prints it with the command's name and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Command {
  const char* name;
  const char* summary;
  const char* usage;  ///< full --help text
  /// Runs with the arguments after the command name; argc/argv are the whole
  /// process's (for MPI_Init). Returns the exit status.
  int (*run)(const std::vector<std::string>& args, int* argc, char*** argv);
};

const std::vector<Command>& commands();

/// True if `args` contains --help or -h.
bool wants_help(const std::vector<std::string>& args);

}  // namespace mpiaccel::tool
