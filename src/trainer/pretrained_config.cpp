// apply_pretrained_config (see pretrained_config.hpp).

#include "trainer/pretrained_config.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "interop/hf_pretrained.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// The broadcast message: "" (no config.json: a lone .safetensors file),
// "1" + the file's text, or "0" + why rank 0 could not read it.
std::string read_on_root(const std::filesystem::path& file) {
  if (!std::filesystem::is_directory(file.parent_path()) || !std::filesystem::exists(file)) return "";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return "0cannot read " + file.string();
  return "1" + text;
}

}  // namespace

std::string apply_pretrained_config(Communicator& comm, ResolvedConfig& resolved) {
  const std::string& dir = resolved.config.model.init_from;
  if (dir.empty()) return "";
  const std::filesystem::path file = std::filesystem::path(dir) / "config.json";
  const std::string message = comm.broadcast_bytes(comm.rank() == 0 ? read_on_root(file) : "", 0);
  if (message.empty()) return "";
  MPIACCEL_CHECK(message[0] == '1', "[model] init_from: " + message.substr(1) + " (read on rank 0)");
  const std::string taken = resolve_pretrained_config(resolved, message.substr(1), file.string());
  if (taken.empty()) return "";
  return "[model] init_from: from " + file.string() + ": " + taken;
}

}  // namespace mpiaccel::detail
