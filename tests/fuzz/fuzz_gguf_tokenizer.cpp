// The tokenizer a GGUF file carries (tokenizer.ggml.*) -> byte-level BPE, then a round trip.
#include "fuzz_input.h"
#include "tokenizer/bpe_from_gguf.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::InputFile input(data, size);
  try {
    const auto tokenizer = kvc::load_bpe_from_gguf(input.path());
    const std::vector<int> ids = tokenizer->encode("Hello world, 12345 \xc3\xa9t\xc3\xa9!\n");
    (void)tokenizer->decode(ids);
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
