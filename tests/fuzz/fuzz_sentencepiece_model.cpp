// tokenizer.model -> the check that guards libsentencepiece, then (when it passes) the library itself:
// load, encode, decode. A crash here is one the check let through.
#include "fuzz_input.h"
#include "tokenizer/sentencepiece_backend.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::InputFile input(data, size);
  try {
    const auto tokenizer = kvc::load_sentencepiece(input.path());
    const std::vector<int> ids = tokenizer->encode("Hello world, 12345 \xef\xbd\x86\xc3\xa9t\xc3\xa9 \xe2\x91\xa0!\n");
    (void)tokenizer->decode(ids);
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
