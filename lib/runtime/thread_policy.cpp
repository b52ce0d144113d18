#include "runtime/thread_policy.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>

#include "util/error.h"

namespace kvc {
namespace {

// Pause instructions an idle OpenMP thread spins before it sleeps (a fraction of a millisecond): long
// enough to bridge the serial gaps between a decode step's parallel regions, short enough to hand the
// core to a descheduled partner thread or another process soon.
constexpr char kSpinCount[] = "3000";

// Set once the thread count is applied: libgomp has read its environment by then.
std::atomic<bool> g_openmp_started{false};

// The environment as the C library holds it (no allocation, safe before any constructor runs).
const char* find_env(const char* name) {
  const size_t n = std::strlen(name);
  if (n == 0 || environ == nullptr) return nullptr;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return nullptr;
}

}  // namespace
}  // namespace kvc

// libgomp reads GOMP_SPINCOUNT once, with getenv, in its constructor, which runs before main (and the
// C library resets any environment a pre-init function sets). This definition in the executable
// interposes getenv so that libgomp sees a bounded spin unless the user set GOMP_SPINCOUNT or
// OMP_WAIT_POLICY; every other name, and the real environment that children inherit, are unchanged.
extern "C" char* getenv(const char* name) noexcept {
  const char* value = kvc::find_env(name);
  if (value == nullptr && !kvc::g_openmp_started.load(std::memory_order_relaxed) &&
      std::strcmp(name, "GOMP_SPINCOUNT") == 0 && kvc::find_env("OMP_WAIT_POLICY") == nullptr) {
    value = kvc::kSpinCount;
  }
  return const_cast<char*>(value);
}

namespace kvc {
namespace {

struct CpuTimes {
  long long busy = 0, total = 0;
  int cpus = 0;
};

// Aggregate CPU time from /proc/stat (clock ticks); cpus = 0 if it cannot be read.
CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu", 0) != 0) break;
    if (line.rfind("cpu ", 0) == 0) {
      std::istringstream fields(line.substr(4));
      long long v[8] = {};
      for (auto& x : v) fields >> x;
      if (!fields) return {};
      for (const long long x : v) t.total += x;
      t.busy = t.total - v[3] - v[4];  // all but idle and iowait
    } else {
      ++t.cpus;
    }
  }
  return t;
}

}  // namespace

int max_threads() { return 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

std::string check_thread_count(int threads) {
  if (threads >= 1 && threads <= max_threads()) return "";
  return std::to_string(threads) + " is out of range: use 1 to " + std::to_string(max_threads()) + " (4 x the " +
         std::to_string(max_threads() / 4) + " hardware threads)";
}

int default_thread_count() {
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (hardware == 1) return 1;
  // Clock ticks are 10 ms: the window must span several of them on every core.
  const CpuTimes a = read_cpu_times();
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const CpuTimes b = read_cpu_times();
  if (a.cpus == 0 || b.cpus != a.cpus || b.total <= a.total) return hardware;
  const double busy_cores = static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total) * a.cpus;
  return std::clamp(hardware - static_cast<int>(std::lround(busy_cores)), 1, hardware);
}

int set_threads(int threads) {
  if (threads == 0) threads = default_thread_count();
  const std::string problem = check_thread_count(threads);
  KVC_CHECK(problem.empty(), "--threads: {}", problem);
  at::set_num_threads(threads);
  g_openmp_started.store(true, std::memory_order_relaxed);
  return threads;
}

}  // namespace kvc
