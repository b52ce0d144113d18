#include "util/build_info.h"

#include "kvc_build_info.inc"  // generated at build time by util/write_build_info.cmake

namespace kvc {

const char* build_version() { return KVC_BUILD_VERSION; }
const char* build_commit() { return KVC_BUILD_COMMIT; }

}  // namespace kvc
