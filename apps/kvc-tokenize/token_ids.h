#pragma once
// Token ids as text: what kvc-tokenize prints and what --decode reads back.
#include <string>
#include <vector>

namespace kvc::cli {

// "1 2 3", "1,2,3", "[1, 2, 3]" or {"ids": [1, 2, 3]} (kvc-tokenize --json's output). Throws kvc::Error
// naming the first thing that is not a token id.
std::vector<int> parse_token_ids(const std::string& text);
std::string format_ids_plain(const std::vector<int>& ids);  // "1 2 3"
std::string format_ids_json(const std::vector<int>& ids);   // {"ids": [1, 2, 3]}

}  // namespace kvc::cli
