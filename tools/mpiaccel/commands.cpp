#include <algorithm>

#include "command.hpp"

namespace mpiaccel::tool {

// One declaration per subcommand file.
extern const Command kEnvCommand;
extern const Command kTrainCommand;

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {kEnvCommand, kTrainCommand};
  return all;
}

bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

}  // namespace mpiaccel::tool
