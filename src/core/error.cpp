// mpiaccel::Error: the one exception type. Its what() is one line that says
// what went wrong, on which rank and host, and where in our sources.

#include "mpiaccel/error.hpp"


#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>

#include "core/error_identity.hpp"
#include "core/host_name.hpp"

namespace mpiaccel {
namespace {

struct ErrorIdentity {
  std::mutex mutex;
  int rank = -1;
  std::string host;
};

// Function-local static: errors thrown during static initialisation of other
// modules still find an initialised identity.
ErrorIdentity& identity() {
  static ErrorIdentity id;
  static std::once_flag host_once;
  std::call_once(host_once, [] { id.host = detail::local_host_name(); });
  return id;
}

// __FILE__ is an absolute build path; the basename is what a reader needs.
const char* base_name(const char* path) {
  if (path == nullptr) return "?";
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

std::string describe(const std::string& message, int rank, const std::string& host,
                     const char* file, int line) {
  std::string text = message;
  text += " [";
  if (rank >= 0) text += "rank " + std::to_string(rank) + " ";
  text += host;
  text += ", ";
  text += base_name(file);
  text += ":" + std::to_string(line) + "]";
  // One line per error, whatever the message: a log of many ranks stays greppable.
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::pair<int, std::string> current_identity() {
  ErrorIdentity& id = identity();
  std::lock_guard<std::mutex> lock(id.mutex);
  return {id.rank, id.host};
}

}  // namespace

Error::Error(std::string message, const char* file, int line)
    : std::runtime_error(message), message_(std::move(message)), file_(file), line_(line) {
  std::tie(rank_, host_) = current_identity();
  // The base was built before the identity was read; give it the full line.
  static_cast<std::runtime_error&>(*this) =
      std::runtime_error(describe(message_, rank_, host_, file_, line_));
}

namespace detail {

void set_error_identity(int rank, std::string host) {
  ErrorIdentity& id = identity();
  std::lock_guard<std::mutex> lock(id.mutex);
  id.rank = rank;
  if (!host.empty()) id.host = std::move(host);
}

void throw_error(std::string message, const char* file, int line) {
  throw Error(std::move(message), file, line);
}

}  // namespace detail
}  // namespace mpiaccel
