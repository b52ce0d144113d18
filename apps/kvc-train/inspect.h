#pragma once
#include <CLI/CLI.hpp>

#include <functional>

namespace kvc::train_app {
// kvc-train inspect: per-token ranks of a text and decode throughput vs the full cache.
void add_inspect_command(CLI::App& app, std::function<int()>& action);
}  // namespace kvc::train_app
