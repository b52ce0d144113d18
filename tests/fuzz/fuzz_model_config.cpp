// config.json -> ModelConfig (every architecture in the table, value ranges, rope scaling, Gemma 3).
#include <string>

#include "core/model_config.h"
#include "fuzz_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const kvc::ModelConfig config = kvc::ModelConfig::from_json_text(text, "fuzz/config.json");
    (void)config.group_size();
    (void)config.kv_dim();
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
