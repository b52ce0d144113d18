// A chat template from a model file -> parse, then render a conversation with every kind of message
// (and an empty one): a bad or hostile template must end in a kvc::Error, never a crash or a hang.
#include <cstdint>
#include <ctime>
#include <string>

#include "chat/chat_template.h"
#include "fuzz_input.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    const kvc::ChatTemplate chat = kvc::ChatTemplate::parse(source, "fuzz");
    kvc::ChatRenderOptions options;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    std::tm now{};
    now.tm_year = 124;
    (void)chat.render({{"system", "Be brief."},
                       {"user", "Hi {{ x }} \xc3\xa9 \xe4\xbd\xa0"},
                       {"assistant", "<think>a</think>b"},
                       {"tool", "42"},
                       {"user", ""}},
                      options, now);
    options.add_generation_prompt = false;
    (void)chat.render({}, options, now);
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
