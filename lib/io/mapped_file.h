#pragma once
// A whole regular file mapped read-only into memory; unmapped when the object dies.
#include <cstdint>
#include <string>

namespace kvc::st {

class MappedFile {
 public:
  // Throws kvc::Error naming the path if it is missing, a folder, not a regular file (a FIFO or device
  // is refused before it is opened, so it cannot block), or unreadable.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // nullptr for an empty file: mmap cannot map zero bytes.
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  unsigned long device_ = 0, inode_ = 0;  // noted as an input while mapped (util/run_files.h)
};

}  // namespace kvc::st
