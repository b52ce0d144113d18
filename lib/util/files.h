#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace kvc {

// Whole file as bytes ("-": standard input); throws kvc::Error naming the path if it is missing or unreadable.
std::string read_text_file(const std::string& path);
bool file_exists(const std::string& path);
bool is_directory(const std::string& path);

// Writes `contents` to `path` through OutputFile (see below), so readers never see half a file.
void write_file_atomic(const std::string& path, const std::string& contents);

// Throws kvc::Error naming `path` unless a later write to it can succeed as far as we can tell now:
// "-", an existing FIFO or character device, or a file (new or not) in an existing writable folder.
// Tools call it before long work so that a typo in an output path does not cost the whole run.
void check_writable_output(const std::string& path);
// Same for an output folder that the tool creates if needed (with missing parents): it exists and is
// writable, or its nearest existing ancestor is a writable folder.
void check_writable_output_folder(const std::string& dir);

// A new name beside `target` for a file written whole and then renamed over it:
// ".<name>.tmp.<pid>.<n>" in the target's folder (a rename never crosses file systems).
std::string temp_path_beside(const std::string& target);
// Removes the temporary files beside `target` left by processes that died before renaming them
// (kill -9, power loss): regular files of this user named as above whose process no longer exists.
void remove_stale_temps_beside(const std::string& target);

// One output file, written the way a user expects from a shell tool:
//   "-"                    standard output;
//   FIFO, character device written through (a pipe, /dev/stdout, /dev/null), never replaced;
//   symlink                followed: the target is written (and itself replaced atomically if it is a
//                          regular file), the link stays a link;
//   regular file or new    a temporary file beside the target, fsynced and renamed over it on commit(),
//                          so readers see the old file or the whole new one.
// Every error is one kvc::Error naming the path the user gave. Destroyed without commit() (an error,
// an exception elsewhere), the temporary file is removed and the target is left as it was.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t size);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // `before_rename` runs once the new bytes are on disk and just before they replace the target: a
  // companion file that must not appear without this one (a store beside its index) is published
  // there. If it throws, the target is left as it was.
  void commit(const std::function<void()>& before_rename = {});

 private:
  [[noreturn]] void fail_with_errno(int error_number);
  void discard();

  std::string user_path_;    // as given, for messages
  std::string target_path_;  // after following symlinks
  std::string temp_path_;    // empty when writing through
  int fd_ = -1;
  bool owns_fd_ = true;  // false for standard output
  bool committed_ = false;
};

}  // namespace kvc
