#include "trainer/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "mpiaccel/error.hpp"

namespace mpiaccel::detail {

double learning_rate_at(int64_t step, int64_t max_steps, double base_lr,
                        const SchedulerConfig& schedule) {
  const int64_t warmup = schedule.warmup_steps;
  if (step < warmup) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (schedule.name == LrSchedule::Constant) return base_lr;
  const double floor = schedule.min_lr_ratio;
  const int64_t decay_steps = std::max<int64_t>(1, max_steps - warmup);
  const double progress =
      std::clamp(static_cast<double>(step - warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  const double factor =
      schedule.name == LrSchedule::Linear ? 1.0 - progress : 0.5 * (1.0 + std::cos(M_PI * progress));  // cosine
  return base_lr * (floor + (1.0 - floor) * factor);
}

}  // namespace mpiaccel::detail
