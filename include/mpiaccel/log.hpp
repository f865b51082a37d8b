#pragma once
// Rank-prefixed logging: every line starts "[rank 3/8 host] ". `print` writes
// from rank 0 only (Accelerate's accelerator.print), unprefixed.

#include <string>

#include "mpiaccel/config_choices.hpp"  // LogLevel

namespace mpiaccel {


/// Sets the identity used as the log prefix; Runtime calls it after MPI_Init.
void set_log_identity(int rank, int world_size, const std::string& host);
void set_log_level(LogLevel level);
/// The filter log() applies: a loop can skip building a message below it,
/// e.g. `if (log_level() <= LogLevel::Debug) log_debug(per_layer_norms());`.
LogLevel log_level();

/// This process's rank and world size as set by set_log_identity (rank -1
/// before MPI is initialised).
int log_rank();
int log_world_size();

/// Writes "[rank r/n host] LEVEL message" to stderr if `level` passes the filter.
void log(LogLevel level, const std::string& message);
inline void log_debug(const std::string& m) { log(LogLevel::Debug, m); }
inline void log_info(const std::string& m) { log(LogLevel::Info, m); }
inline void log_warn(const std::string& m) { log(LogLevel::Warn, m); }
inline void log_error(const std::string& m) { log(LogLevel::Error, m); }

/// Writes `message` and a newline to stdout on rank 0 only.
void print(const std::string& message);

}  // namespace mpiaccel
