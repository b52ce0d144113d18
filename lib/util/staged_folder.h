#pragma once
// Several output files that appear together or not at all (kvc-profile's profile, table, plot data
// and heatmaps). They are written into a hidden folder inside the output folder,
// `.staging.<pid>.<n>`, and moved into place by commit(), each by one rename. A run that fails or is
// interrupted before commit() leaves the output folder as it found it: its staging folder is removed,
// and so is the output folder itself when this run made it and it is still empty. A staging folder of
// a killed run is removed by the next run into that folder.
#include <string>

namespace kvc {

class StagedFolder {
 public:
  // Makes `dir` (and its parents) if missing. Throws kvc::Error naming `dir` if it cannot.
  explicit StagedFolder(const std::string& dir);
  ~StagedFolder();
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  // Where to write the output file `name` before commit().
  std::string path(const std::string& name) const;
  // The staging folder itself (a program run there writes its files into it).
  const std::string& staging() const { return staging_; }
  // Moves every file written into the staging folder to `dir`, replacing files of the same names.
  void commit();

 private:
  void discard() noexcept;

  std::string dir_;
  std::string staging_;
  bool made_dir_ = false;
  bool committed_ = false;
};

}  // namespace kvc
