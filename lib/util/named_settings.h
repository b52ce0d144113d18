#pragma once
// The settings a resumable run was made with, each under the flag that sets it. A run stores them
// beside its hash, so that resuming under other flags can name what differs ("--alpha 0.5, this run
// 2") instead of saying only that something does.
#include <string>
#include <utility>
#include <vector>

namespace kvc {

using NamedSettings = std::vector<std::pair<std::string, std::string>>;

// A JSON array of [name, value] pairs, in order.
std::string named_settings_text(const NamedSettings& settings);
// The pairs back; empty for text that is not such an array (a file from before they were stored).
NamedSettings parse_named_settings(const std::string& text);
// "--alpha 0.5 (this run: 2), --steps 40 (this run: 60)" for each name whose value differs or that only
// one side has; "" when they agree.
std::string settings_differences(const NamedSettings& stored, const NamedSettings& now);

}  // namespace kvc
