#pragma once
// Reads a Python module of the form jieba's HMM tables use (finalseg/prob_*.py): optional
// `from ... import ...` lines, then one assignment `NAME = {...}` of nested dicts with str keys and
// float values. Enough of Python's literal syntax for those files, not a general parser.
#include <string>
#include <utility>
#include <vector>

namespace kvc {

struct PythonDictValue {
  bool is_dict = false;
  double number = 0.0;
  // In source order; a repeated key appears twice, and the later entry is the one Python keeps.
  std::vector<std::pair<std::u32string, PythonDictValue>> entries;
};

// The value assigned to `name` in `source`; throws kvc::Error naming path:line at the first syntax
// error.
PythonDictValue parse_python_dict_assignment(const std::string& source, const std::string& name,
                                             const std::string& path);

}  // namespace kvc
