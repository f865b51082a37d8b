#pragma once
// A scratch directory every rank of the test world sees (rank 0 makes it and
// broadcasts its name), removed when the test case ends, after every rank is
// done with it.

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "support/mpi_test.hpp"

namespace mpiaccel::test {

struct SharedDir {
  explicit SharedDir(const std::string& tag = "test") {
    std::string mine;
    if (world().rank() == 0) {
      std::string pattern = "/tmp/mpiaccel_" + tag + "_XXXXXX";
      mine = mkdtemp(pattern.data());
    }
    path = world().broadcast_bytes(mine, 0);
  }
  ~SharedDir() {
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(path);
  }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;

  std::string path;
};

}  // namespace mpiaccel::test
