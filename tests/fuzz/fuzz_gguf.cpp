// GGUF reader (metadata, tensor infos, alignment, data region) and GGUF metadata -> ModelConfig.
#include "fuzz_input.h"
#include "io/gguf_reader.h"
#include "model/gguf_config.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::InputFile input(data, size);
  try {
    const auto file = kvc::gguf::GgufFile::open(input.path());
    for (const auto& tensor : file->tensors()) {
      if (tensor.nbytes > 0) {
        volatile uint8_t sink = tensor.data[0];
        sink = tensor.data[tensor.nbytes - 1];
        (void)sink;
      }
    }
    const kvc::ModelConfig config = kvc::model_config_from_gguf(*file);
    (void)config.group_size();
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
