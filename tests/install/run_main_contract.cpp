// A user's program built against the installed mpiaccel with pkg-config
// (tests/scripts/test_install_and_examples.sh): run_main's start and its
// failure contract. After `--`:
//   (nothing)      print the version and world size, exit 0
//   throw-on R     rank R throws (R = all: every rank throws)
//   exit N         return N from the body
#include <mpiaccel/mpiaccel.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
  return mpiaccel::run_main(argc, argv, [](mpiaccel::Accelerator& acc, const mpiaccel::ProgramArgs& args) {
    if (args.rest.size() == 2 && args.rest[0] == "throw-on") {
      if (args.rest[1] == "all" || std::stoi(args.rest[1]) == acc.rank())
        throw std::runtime_error("the user's code failed on purpose");
      acc.wait_for_everyone();  // the healthy ranks wait here for the failed one
    }
    if (args.rest.size() == 2 && args.rest[0] == "exit") return std::stoi(args.rest[1]);
    acc.print(std::string("mpiaccel ") + mpiaccel::version() + " (headers " + MPIACCEL_VERSION_STRING +
              ") on " + std::to_string(acc.world_size()) + " rank(s), strategy " + mpiaccel::name_of(acc.config().distributed.strategy));
    return 0;
  });
}
