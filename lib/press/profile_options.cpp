// ProfileOptions::validate: values that would write an empty or meaningless profile are refused early.
#include "press/attention_profile.h"
#include "util/error.h"

namespace kvc {

void ProfileOptions::validate() const {
  KVC_CHECK(windows >= 1, "--windows must be at least 1, got {}", windows);
  KVC_CHECK(task_window >= 1, "--task-window must be at least 1, got {}", task_window);
  KVC_CHECK(context >= 2 * task_window, "--ctx-size {} must be at least twice --task-window {}", context, task_window);
  KVC_CHECK(!ratios.empty(), "--ratios needs at least one ratio");
  // NaN fails both comparisons, so it is refused too.
  for (double r : ratios) KVC_CHECK(r > 0 && r < 1, "--ratios: each ratio must be in (0, 1), got {}", r);
}

}  // namespace kvc
