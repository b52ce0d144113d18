#include "compression/press_registry.h"

namespace kvc {

// Eviction methods register here (one file per method under lib/press/).
void register_builtin_presses() {}

}  // namespace kvc
