#pragma once
// A kvc-train checkpoint is LibTorch's archive followed by a 24-byte trailer: the magic "KVCCKPT1", the
// archive's length and its FNV-1a 64 hash (little-endian). A file cut short or changed in one byte is
// refused on resume instead of being read out of bounds or trained from silently different gates.
#include <string>

namespace kvc {

std::string seal_checkpoint(const std::string& archive);
// The archive inside a checkpoint file's bytes; throws kvc::Error naming `path` when the trailer is
// missing or its length or hash disagrees with the bytes before it.
std::string checkpoint_archive(const std::string& file, const std::string& path);

}  // namespace kvc
