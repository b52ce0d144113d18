#pragma once
// "-" as an input names standard input. It is read once, whole, into an anonymous in-memory file:
// every reader of "-" in a run (a tool that hashes an artifact, then maps it) sees the same bytes, and
// code that maps or reopens files by path works on a pipe unchanged.
#include <string>

namespace kvc {

// For "-": a path to that in-memory copy ("/proc/self/fd/N"), standard input being read on the first
// call; any other path is returned as given. Throws kvc::Error if standard input cannot be read.
std::string input_path(const std::string& path);

}  // namespace kvc
