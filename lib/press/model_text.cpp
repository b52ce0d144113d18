// Text a press feeds the model itself (KVzip's repeat prompt), encoded by the model's own tokenizer.
#include <exception>

#include "press/press.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {

std::vector<int> encode_with_model_tokenizer(const LlamaModel& model, const std::string& text,
                                             const std::string& press) {
  try {
    return Tokenizer::load(model.dir()).encode(text);
  } catch (const std::exception& e) {
    fail("--press {}: needs the model's tokenizer to encode its own prompt ({})", press, e.what());
  }
}

}  // namespace kvc
