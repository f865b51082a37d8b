#pragma once
// Where a run's metrics go ([logging] report_to, the Trainer's report_to):
// the JSON-lines metrics file (metrics_log.hpp) and TensorBoard event files
// (event_file.hpp) in [logging] logging_dir. Rank 0 writes; the other ranks
// hold a report that writes nothing. docs/trainer.md, "Run outputs".

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mpiaccel/config.hpp"
#include "trainer/event_file.hpp"
#include "trainer/metrics_log.hpp"

namespace mpiaccel::detail {

/// TensorBoard's tag of a metrics-file key: the Trainer's names, train/loss,
/// train/learning_rate, train/grad_norm, eval/loss, eval/<metric> for val_<metric>;
/// "" for elapsed_s (TensorBoard keeps each event's wall time).
std::string tensorboard_tag(const std::string& key);

class RunReport {
 public:
  /// Validates `logging.report_to` (every rank alike: a bad value fails them
  /// all with one line); writes only if `main_process`.
  RunReport(const LoggingConfig& logging, bool main_process);

  /// The run starts after step `first_step` (0, or the step a resume starts
  /// from: what an earlier run logged after it is dropped from the metrics
  /// file and, by a SessionLog START, from TensorBoard's view) under the
  /// resolved config `config_text` (a TensorBoard text).
  void start(int64_t first_step, const std::string& config_text);
  /// One metrics line at `step`: {"step": step, key: value, ...} and a
  /// TensorBoard scalar per key.
  void record(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  /// A text at `step` (TensorBoard only, under `tag`).
  void text(int64_t step, const std::string& tag, const std::string& text);

 private:
  ReportTargets targets_;  // before the writers: they are built from it
  MetricsLog jsonl_;
  std::unique_ptr<EventFile> events_;
};

}  // namespace mpiaccel::detail
