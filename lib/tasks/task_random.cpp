#include "tasks/task_random.h"

#include "util/error.h"
#include "util/hash.h"

namespace kvc {

TaskRng::TaskRng(uint64_t seed, const std::string& stream)
    : engine_(fnv1a64(stream.data(), stream.size(), seed ^ 0xcbf29ce484222325ULL)) {}

uint64_t TaskRng::below(uint64_t bound) {
  // Rejecting the top partial block keeps every residue equally likely.
  const uint64_t limit = std::mt19937_64::max() - std::mt19937_64::max() % bound;
  uint64_t draw = engine_();
  while (draw >= limit) draw = engine_();
  return draw % bound;
}

double TaskRng::unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

std::string TaskRng::digits(int count) {
  KVC_CHECK(count >= 1, "a number needs at least one digit, got {}", count);
  std::string number(1, static_cast<char>('1' + below(9)));
  while (static_cast<int>(number.size()) < count) number.push_back(static_cast<char>('0' + below(10)));
  return number;
}

std::string TaskRng::letters(int count, char first_letter) {
  std::string word;
  while (static_cast<int>(word.size()) < count) word.push_back(static_cast<char>(first_letter + below(26)));
  return word;
}

}  // namespace kvc
