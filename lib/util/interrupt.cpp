#include "util/interrupt.h"

#include "util/error.h"

#include <unistd.h>
#include <atomic>
#include <csignal>
#include <cstdlib>

namespace kvc {
namespace {

std::atomic<int> g_signals{0};

void on_signal(int) {
  if (g_signals.fetch_add(1) >= 1) std::_Exit(130);
  const char msg[] = "\ninterrupted: finishing the current step (Ctrl-C again to abort)\n";
  [[maybe_unused]] auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
}

}  // namespace

void install_interrupt_handler() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupted() { return g_signals.load() > 0; }

void stop_if_interrupted(const std::string& message) {
  if (interrupted()) throw InterruptedError(message);
}

}  // namespace kvc
