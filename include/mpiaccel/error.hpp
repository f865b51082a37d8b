#pragma once
// The one exception type of mpiaccel, and the check macro that throws it.
// Library-specific checks (MPI, NCCL, CUDA, HDF5) live in internal headers
// (src/runtime/check_*.hpp) because public headers expose no library types.

#include <stdexcept>
#include <string>

namespace mpiaccel {

/// An error raised by mpiaccel. `what()` is one line:
/// "<message> [rank R/N host, file:line]" so that a log of many ranks says who
/// failed and where. `message()` is the bare reason, for user-facing output.
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line);

  const std::string& message() const noexcept { return message_; }
  int rank() const noexcept { return rank_; }
  const std::string& host() const noexcept { return host_; }
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string message_;
  int rank_;
  std::string host_;
  const char* file_;
  int line_;
};

namespace detail {
[[noreturn]] void throw_error(std::string message, const char* file, int line);
}  // namespace detail

}  // namespace mpiaccel

/// Throws mpiaccel::Error with `msg` (anything convertible to std::string) when
/// `cond` is false. Never compiled out: use it for anything a user or a file can
/// get wrong.
#define MPIACCEL_CHECK(cond, msg)                                      \
  do {                                                                 \
    if (!(cond)) ::mpiaccel::detail::throw_error((msg), __FILE__, __LINE__); \
  } while (0)

#define MPIACCEL_THROW(msg) ::mpiaccel::detail::throw_error((msg), __FILE__, __LINE__)
