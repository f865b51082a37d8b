#include "trainer/trace_writer.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mpiaccel/comm.hpp"
#include "mpiaccel/error.hpp"
#include "runtime/trace.hpp"

namespace mpiaccel::detail {

void write_merged_trace(Communicator& comm, const std::string& path) {
  auto parts = comm.gather_bytes(Tracer::instance().events_json(comm.rank()), 0);
  if (comm.rank() != 0) return;
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path, std::ios::trunc);
  MPIACCEL_CHECK(out.good(), "cannot write trace file '" + path + "': " + std::strerror(errno));
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t r = 0; r < parts.size(); ++r) out << (r ? ",\n" : "") << parts[r];
  out << "\n]}\n";
  MPIACCEL_CHECK(out.good(), "writing trace file '" + path + "' failed");
}

}  // namespace mpiaccel::detail
