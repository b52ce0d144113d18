// Built into its own shared library and opened with RTLD_DEEPBIND: sentencepiece carries a private
// protobuf that clashes with LibTorch's if both are linked into one executable.
#include "tokenizer/spm_shim.h"

#include <sentencepiece_processor.h>

#include <string>
#include <vector>

#define KVC_SPM_EXPORT __attribute__((visibility("default")))

extern "C" {

KVC_SPM_EXPORT void* kvc_spm_load(const char* path, kvc_spm_bytes_sink error, void* error_context) {
  auto* processor = new sentencepiece::SentencePieceProcessor();
  const auto status = processor->Load(path);
  if (!status.ok()) {
    const std::string message = status.ToString();
    error(error_context, message.data(), message.size());
    delete processor;
    return nullptr;
  }
  return processor;
}

KVC_SPM_EXPORT void kvc_spm_free(void* handle) { delete static_cast<sentencepiece::SentencePieceProcessor*>(handle); }

KVC_SPM_EXPORT int kvc_spm_encode(void* handle, const char* text, size_t size, kvc_spm_ids_sink sink, void* context) {
  std::vector<int> ids;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(absl::string_view(text, size), &ids);
  if (!status.ok()) return -1;
  sink(context, ids.data(), ids.size());
  return 0;
}

KVC_SPM_EXPORT int kvc_spm_decode(void* handle, const int* ids, size_t count, kvc_spm_bytes_sink sink, void* context) {
  std::string text;
  const auto status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(std::vector<int>(ids, ids + count), &text);
  if (!status.ok()) return -1;
  sink(context, text.data(), text.size());
  return 0;
}

KVC_SPM_EXPORT int kvc_spm_vocab_size(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

KVC_SPM_EXPORT int kvc_spm_id_to_piece(void* handle, int id, kvc_spm_bytes_sink sink, void* context) {
  auto* processor = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  if (id < 0 || id >= processor->GetPieceSize()) return -1;
  const std::string piece = processor->IdToPiece(id);
  sink(context, piece.data(), piece.size());
  return 0;
}

KVC_SPM_EXPORT int kvc_spm_piece_to_id(void* handle, const char* piece, size_t size) {
  auto* processor = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  const int id = processor->PieceToId(absl::string_view(piece, size));
  // PieceToId answers unk_id for unknown pieces; only an exact spelling counts.
  if (id < 0 || processor->IdToPiece(id) != std::string(piece, size)) return -1;
  return id;
}

KVC_SPM_EXPORT int kvc_spm_bos_id(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->bos_id();
}

KVC_SPM_EXPORT int kvc_spm_eos_id(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->eos_id();
}
}
