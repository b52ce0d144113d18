#include "press/press_registry.h"
#include "press/press.h"

namespace kvc {

// Eviction methods register here (one file per method under lib/press/).
void register_builtin_presses() {
  register_streaming_llm();
  register_h2o();
  register_tova();
  register_snapkv();
  register_pyramidkv();
  register_knorm();
  register_random();
  register_dynamickv();
  register_d2o();
  register_kvcompose();
  register_ada();
}

}  // namespace kvc
