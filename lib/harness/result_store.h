#pragma once
// A resumable result file: one JSON object per line, one line per finished cell. Each append writes a
// complete line and fsyncs it, so a run killed at any moment leaves every finished cell readable; at
// most the line being written is torn, and open() drops it (with a warning) so that the run resumes
// from the last complete cell.
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace kvc {

class ResultStore {
 public:
  // Opens `path` (created if missing, with its folder's existence checked) and loads its records; each
  // must hold the string field `key_field`. A last line that is torn (no newline, or not JSON) is cut
  // off the file with a warning on stderr; a malformed line elsewhere is a kvc::Error "path:line: ...".
  ResultStore(std::string path, std::string key_field = "cell");

  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return index_.count(key) > 0; }
  // The last record with this key, or nullptr. Valid until the next append (records may move).
  const nlohmann::json* find(const std::string& key) const;
  const std::vector<nlohmann::json>& records() const { return records_; }
  size_t dropped_torn_lines() const { return dropped_; }

  // Appends `record` (which must hold key_field) as one line, flushed and fsync'd before returning.
  void append(const nlohmann::json& record);
  // Appends every record, one line each, with one fsync for the batch (a torn last line on a crash is
  // dropped on open, as for append).
  void append_all(const std::vector<nlohmann::json>& records);

 private:
  std::string path_, key_field_;
  std::vector<nlohmann::json> records_;
  std::map<std::string, size_t> index_;  // key -> its last record in records_
  size_t dropped_ = 0;
};

}  // namespace kvc
