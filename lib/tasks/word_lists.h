#pragma once
// Small built-in English vocabularies for synthetic tasks, so that generators need no data files. No word
// is a substring of another, so substring matching of answers cannot confuse two of them.
#include <string>
#include <vector>

namespace kvc {

const std::vector<std::string>& english_adjectives();
const std::vector<std::string>& english_nouns();

// Every "adjective noun" pair, e.g. "purple ship": the entities of needle facts.
std::vector<std::string> adjective_noun_pairs(const std::string& separator = " ");

}  // namespace kvc
