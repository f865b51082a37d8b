#pragma once
// Learning-rate schedules of [scheduler]: linear warmup, then constant,
// linear decay or cosine decay to min_lr_ratio·lr at max_steps
// (transformers' get_*_schedule_with_warmup, with a floor).

#include <cstdint>

#include "mpiaccel/config.hpp"

namespace mpiaccel::detail {

/// The learning rate of optimizer step `step` (0-based) of `max_steps`.
double learning_rate_at(int64_t step, int64_t max_steps, double base_lr,
                        const SchedulerConfig& schedule);

}  // namespace mpiaccel::detail
