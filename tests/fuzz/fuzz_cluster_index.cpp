// A clustered cache's index (safetensors + metadata) -> the store manifest kvc-cluster verify checks.
#include "fuzz_input.h"
#include "retrieval/index_reader.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::InputFile input(data, size);
  try {
    const kvc::retrieval::LoadedIndex index = kvc::retrieval::read_index(input.path());
    (void)index.manifest.extents.size();
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
