// Safetensors reader: header parsing, offsets, data coverage, then every accessor a loader uses.
#include "fuzz_input.h"
#include "io/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::InputFile input(data, size);
  try {
    const auto file = kvc::st::SafetensorsFile::open(input.path());
    for (const std::string& name : file->names()) {
      const kvc::st::TensorInfo& info = file->info(name);
      const uint8_t* bytes = file->data(name);
      // Touch the first and last byte: the reader promised they lie inside the mapping.
      if (info.nbytes() > 0) {
        volatile uint8_t sink = bytes[0];
        sink = bytes[info.nbytes() - 1];
        (void)sink;
      }
    }
    file->check_all_finite();
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
