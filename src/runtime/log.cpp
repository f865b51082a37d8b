#include "mpiaccel/log.hpp"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>

#include "mpiaccel/error.hpp"

namespace mpiaccel {
namespace {

struct LogIdentity {
  int rank = -1;
  int world_size = 0;
  std::string host;
  LogLevel level = LogLevel::Info;
};

LogIdentity& identity() {
  static LogIdentity id = [] {
    LogIdentity fresh;
    char name[256] = {0};
    if (gethostname(name, sizeof(name) - 1) == 0) fresh.host = name;
    return fresh;
  }();
  return id;
}

// Lines from several threads of one rank must not interleave mid-line.
std::mutex& output_mutex() {
  static std::mutex m;
  return m;
}

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "DEBUG";
    case LogLevel::Info: return "INFO";
    case LogLevel::Warn: return "WARN";
    case LogLevel::Error: return "ERROR";
  }
  return "?";
}

}  // namespace

void set_log_identity(int rank, int world_size, const std::string& host) {
  auto& id = identity();
  id.rank = rank;
  id.world_size = world_size;
  id.host = host;
}

void set_log_level(LogLevel level) { identity().level = level; }
LogLevel log_level() { return identity().level; }
int log_rank() { return identity().rank; }
int log_world_size() { return identity().world_size; }

void log(LogLevel level, const std::string& message) {
  const auto& id = identity();
  if (level < id.level) return;
  std::string line;
  if (id.rank >= 0)
    line = "[rank " + std::to_string(id.rank) + "/" + std::to_string(id.world_size) + " " +
           id.host + "] ";
  line += level_tag(level);
  line += ' ';
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> lock(output_mutex());
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void print(const std::string& message) {
  if (identity().rank > 0) return;
  std::lock_guard<std::mutex> lock(output_mutex());
  std::fputs(message.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace mpiaccel
