// apply_pretrained_config (see pretrained_config.hpp).

#include "trainer/pretrained_config.hpp"

#include <string>

#include "interop/hf_pretrained.hpp"
#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {
namespace {

// The broadcast message: "" (no config.json: a lone .safetensors file),
// "1" + path + NUL + the file's text, or "0" + why rank 0 could not read it.
std::string read_on_root(const std::string& init_from) {
  std::string path, text;
  try {
    if (!read_pretrained_config(init_from, &path, &text)) return "";
  } catch (const Error& e) {
    return "0" + e.message();
  }
  return "1" + path + '\0' + text;
}

}  // namespace

std::string apply_pretrained_config(Communicator& comm, ResolvedConfig& resolved) {
  const std::string& init_from = resolved.config.model.init_from;
  if (init_from.empty()) return "";
  const std::string message = comm.broadcast_bytes(comm.rank() == 0 ? read_on_root(init_from) : "", 0);
  if (message.empty()) return "";
  MPIACCEL_CHECK(message[0] == '1', message.substr(1) + " (read on rank 0)");
  const size_t end = message.find('\0');
  const std::string path = message.substr(1, end - 1);
  const std::string taken = resolve_pretrained_config(resolved, message.substr(end + 1), path);
  if (taken.empty()) return "";
  return "[model] init_from: from " + path + ": " + taken;
}

}  // namespace mpiaccel::detail
