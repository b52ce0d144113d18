#pragma once
// Reading a clustered cache's index (the layout is in index_file.h) needs no LibTorch: kvc-cluster verify
// and the fuzz target use it alone.
#include <cstdint>
#include <string>
#include <vector>

#include "retrieval/page_store.h"

namespace kvc::retrieval {

struct LoadedIndex {
  std::string store_path;
  StoreManifest manifest;
  std::vector<std::vector<double>> thresholds;  // [layer][KV head]
  int64_t clusters = 0, entries = 0;
};
// Throws kvc::Error naming the file and the metadata or tensor at fault.
LoadedIndex read_index(const std::string& path);

}  // namespace kvc::retrieval
