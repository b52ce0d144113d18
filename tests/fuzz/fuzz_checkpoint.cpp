// kvc-train checkpoints: the trailer that guards LibTorch's archive on --resume. An input is either refused
// with a kvc::Error or yields an archive that, sealed again, is exactly the input (the trailer covers
// every byte); anything else aborts, which libFuzzer reports as a crash.
#include <cstdlib>
#include <string>

#include "fuzz_input.h"
#include "io/checkpoint_trailer.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string file(reinterpret_cast<const char*>(data), size);
  try {
    const std::string archive = kvc::checkpoint_archive(file, "input.ckpt");
    if (kvc::seal_checkpoint(archive) != file) std::abort();
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
