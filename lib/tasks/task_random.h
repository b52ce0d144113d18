#pragma once
// Seeded randomness for task generators. The standard distributions and std::shuffle are
// implementation-defined, so the same seed could give other samples with another standard library;
// everything here is derived from std::mt19937_64's specified output instead.
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace kvc {

class TaskRng {
 public:
  // `stream` names a purpose ("keys", "order"): streams of one seed are independent, so that drawing one
  // more value for one purpose leaves the others unchanged.
  explicit TaskRng(uint64_t seed, const std::string& stream = "");

  uint64_t below(uint64_t bound);                     // uniform in [0, bound); bound > 0
  double unit();                                      // uniform in [0, 1)
  std::string digits(int count);                      // a decimal number of `count` digits without a leading zero
  std::string letters(int count, char first_letter);  // `count` random letters from first_letter's case

  template <typename T>
  const T& pick(const std::vector<T>& items) {
    return items[below(items.size())];
  }

  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace kvc
