#pragma once
// Ctrl-C handling for long runs: the first SIGINT sets a flag that loops poll so they can stop at a
// safe point (results flushed, files complete); a second one exits at once.
#include <string>

namespace kvc {

void install_interrupt_handler();
bool interrupted();
// Throws InterruptedError(message) once interrupted(): the check a long loop makes at a safe point.
void stop_if_interrupted(const std::string& message);

}  // namespace kvc
