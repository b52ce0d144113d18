#include "runtime/interrupt_poll.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "util/interrupt.h"

namespace kvc {

bool InterruptPoll::stop() {
  if (ranks_.world() == 1) return interrupted();
  if (until_next_-- > 0) return false;
  constexpr double kSecondsBetweenAsks = 0.5;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  // The root's proposal for the next count rides in the same sum as the interrupt flags. It at most
  // doubles per ask, so a first ask that measured nothing cannot jump to thousands of slow rounds.
  const double target = static_cast<double>(rounds_) * kSecondsBetweenAsks / std::max(seconds, 1e-6);
  const double proposed =
      ranks_.is_root() ? std::clamp(target, 1.0, std::min(4096.0, 2.0 * static_cast<double>(rounds_))) : 0.0;
  at::Tensor t = at::tensor({interrupted() ? 1.0 : 0.0, std::floor(proposed)}, at::kDouble);
  std::vector<at::Tensor> one = {t};
  ranks_.sum(one);
  rounds_ = std::max<int64_t>(1, static_cast<int64_t>(t[1].item<double>()));
  until_next_ = rounds_ - 1;
  return t[0].item<double>() > 0;
}

}  // namespace kvc
