#pragma once
// Version and commit of this build, for the metadata every result file carries.
namespace kvc {

const char* build_version();
// Short commit hash at build time, with "+dirty" when the tree had uncommitted changes.
const char* build_commit();

}  // namespace kvc
