// RunReport (see run_report.hpp).

#include "trainer/run_report.hpp"

#include "core/json_line.hpp"
#include "mpiaccel/error.hpp"
#include "mpiaccel/log.hpp"

namespace mpiaccel::detail {

std::string tensorboard_tag(const std::string& key) {
  if (key == "elapsed_s") return "";
  if (key == "lr") return "train/learning_rate";
  if (key == "val_loss") return "eval/loss";
  if (key.compare(0, 4, "val_") == 0) return "eval/" + key.substr(4);
  return "train/" + key;
}

RunReport::RunReport(const LoggingConfig& logging, bool main_process)
    : targets_(report_targets(logging)), jsonl_(logging.metrics_file, main_process && targets_.jsonl) {
  if (!main_process || !targets_.tensorboard) return;
  MPIACCEL_CHECK(!logging.logging_dir.empty(), "[logging] report_to names tensorboard and logging_dir is empty; "
                                               "set logging_dir to the event files' directory");
  events_ = std::make_unique<EventFile>(logging.logging_dir);
  log_info("TensorBoard: events in " + events_->path() + " (tensorboard --logdir " + logging.logging_dir + ")");
}

void RunReport::start(int64_t first_step, const std::string& config_text) {
  if (first_step > 0) {
    jsonl_.forget_steps_after(first_step);
    if (events_) events_->restart(first_step + 1);
  }
  text(first_step, "config", "```ini\n" + config_text + "```");
}

void RunReport::record(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  JsonLine line;
  line.add("step", static_cast<long long>(step));
  for (const auto& [key, value] : values) line.add(key, value);
  jsonl_.write(line);
  if (!events_) return;
  for (const auto& [key, value] : values) {
    const std::string tag = tensorboard_tag(key);
    if (!tag.empty()) events_->scalar(step, tag, value);
  }
  events_->flush();
}

void RunReport::text(int64_t step, const std::string& tag, const std::string& text) {
  if (!events_) return;
  events_->text(step, tag, text);
  events_->flush();
}

}  // namespace mpiaccel::detail
