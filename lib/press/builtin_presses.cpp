#include "press/press_registry.h"

namespace kvc {

// One line per method file under lib/press/: its registration (register_method with a builder).
void register_streaming_llm();
void register_h2o();
void register_tova();
void register_snapkv();
void register_pyramidkv();
void register_knorm();
void register_random();
void register_dynamickv();
void register_d2o();
void register_kvcompose();
void register_ada();

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
