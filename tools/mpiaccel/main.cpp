// mpiaccel: the command line of the toolkit (docs/design.md, "Command line").

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/version.hpp"

namespace {

void print_overview() {
  std::cout << "usage: mpiaccel <command> [options]\n\n"
               "MPI-native distributed training for LibTorch (DDP, FSDP, ZeRO, mixed precision).\n\n"
               "commands:\n";
  for (const auto& command : mpiaccel::tool::commands())
    std::printf("  %-16s %s\n", command.name, command.summary);
  std::cout << "\n`mpiaccel <command> --help` describes a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_overview();
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_overview();
    return 0;
  }
  if (name == "--version") {
    std::cout << "mpiaccel " << mpiaccel::version() << "\n";
    return 0;
  }
  for (const auto& command : mpiaccel::tool::commands()) {
    if (name != command.name) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    if (mpiaccel::tool::wants_help(args)) {
      std::cout << command.usage;
      return 0;
    }
    try {
      return command.run(args, &argc, &argv);
    } catch (const mpiaccel::tool::UsageError& e) {
      std::cerr << "mpiaccel: " << name << ": " << e.what() << " (see `mpiaccel " << name
                << " --help`)\n";
      return 2;
    } catch (const mpiaccel::Error& e) {
      std::cerr << "mpiaccel: " << name << ": " << e.message() << "\n";
      return 1;
    } catch (const std::exception& e) {
      std::cerr << "mpiaccel: " << name << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cerr << "mpiaccel: unknown command '" << name << "' (see `mpiaccel --help`)\n";
  return 2;
}
