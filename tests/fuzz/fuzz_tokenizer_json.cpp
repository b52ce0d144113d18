// tokenizer.json -> byte-level BPE (model, pre-tokenizer, normalizer, added tokens), then a round trip.
#include "fuzz_input.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvc::fuzz::InputFile input(data, size);
  try {
    (void)kvc::tokenizer_json_is_byte_level(input.path());
    const auto tokenizer = kvc::load_tokenizer_json(input.path());
    const std::vector<int> ids = tokenizer->encode("Hello world, 12345 \xc3\xa9t\xc3\xa9!\n");
    (void)tokenizer->decode(ids);
    for (int id : ids) (void)tokenizer->piece(id);
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
