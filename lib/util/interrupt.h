#pragma once
// Ctrl-C handling for long runs: the first SIGINT sets a flag that loops poll so they can stop at a
// safe point (results flushed, files complete); a second one exits at once.
namespace kvc {

void install_interrupt_handler();
bool interrupted();

}  // namespace kvc
