#include "harness/result_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.h"
#include "util/files.h"

namespace kvc {

ResultStore::ResultStore(std::string path, std::string key_field)
    : path_(std::move(path)), key_field_(std::move(key_field)) {
  if (!file_exists(path_)) return;
  const std::string text = read_text_file(path_);
  size_t begin = 0, line = 0, good_end = 0;
  while (begin < text.size()) {
    ++line;
    const size_t nl = text.find('\n', begin);
    const bool complete = nl != std::string::npos;
    const std::string body = text.substr(begin, (complete ? nl : text.size()) - begin);
    const size_t next = complete ? nl + 1 : text.size();
    const bool last = next >= text.size();
    if (body.find_first_not_of(" \t\r") == std::string::npos) {
      begin = next;
      if (complete) good_end = next;
      continue;
    }
    nlohmann::json record = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    const bool valid = complete && record.is_object() && record.contains(key_field_) && record[key_field_].is_string();
    if (!valid) {
      KVC_CHECK(last, "{}:{}: not a complete result record; the file is corrupt (delete the line or the file)", path_,
                line);
      std::fprintf(stderr, "warning: %s:%zu: dropping a torn last line (%zu bytes) left by an interrupted run\n",
                   path_.c_str(), line, body.size());
      ++dropped_;
      break;
    }
    index_[record[key_field_].get<std::string>()] = records_.size();
    records_.push_back(std::move(record));
    good_end = next;
    begin = next;
  }
  if (good_end < text.size()) {
    KVC_CHECK(::truncate(path_.c_str(), static_cast<off_t>(good_end)) == 0, "{}: cannot cut the torn line: {}", path_,
              std::strerror(errno));
  }
}

const nlohmann::json* ResultStore::find(const std::string& key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &records_[it->second];
}

void ResultStore::append(const nlohmann::json& record) { append_all({record}); }

void ResultStore::append_all(const std::vector<nlohmann::json>& records) {
  std::string lines;
  for (const auto& record : records) {
    KVC_CHECK(record.contains(key_field_) && record[key_field_].is_string(), "result record without a '{}' key",
              key_field_);
    lines += record.dump() + "\n";
  }
  if (lines.empty()) return;
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  KVC_CHECK(fd >= 0, "{}: cannot open for appending: {}", path_, std::strerror(errno));
  size_t written = 0;
  while (written < lines.size()) {
    const ssize_t n = ::write(fd, lines.data() + written, lines.size() - written);
    if (n < 0 && errno == EINTR) continue;  // Ctrl-C arrives mid-write: finish the lines
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      fail("{}: write failed: {}", path_, std::strerror(err));
    }
    written += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  for (const auto& record : records) {
    index_[record[key_field_].get<std::string>()] = records_.size();
    records_.push_back(record);
  }
}

}  // namespace kvc
