#include <algorithm>

#include "command.hpp"

namespace mpiaccel::tool {

// One declaration per subcommand file.
extern const Command kEnvCommand;
extern const Command kTrainCommand;
extern const Command kCkptCommand;
extern const Command kConfigCommand;
extern const Command kLaunchCommand;
extern const Command kPlotCommand;
extern const Command kEstimateMemoryCommand;
extern const Command kDataCommand;
extern const Command kGenerateCommand;

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {kEnvCommand,   kConfigCommand, kLaunchCommand,
                                            kDataCommand,  kTrainCommand,  kGenerateCommand,
                                            kCkptCommand,  kPlotCommand,   kEstimateMemoryCommand};
  return all;
}

bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

}  // namespace mpiaccel::tool
