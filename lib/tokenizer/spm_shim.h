#pragma once
// C interface of libkvc_spm.so, the only object that links libsentencepiece.
#include <stddef.h>

extern "C" {
typedef void (*kvc_spm_bytes_sink)(void* context, const char* data, size_t size);
typedef void (*kvc_spm_ids_sink)(void* context, const int* ids, size_t count);

// Returns a handle, or NULL with a message written to `error` (sink called once).
void* kvc_spm_load(const char* path, kvc_spm_bytes_sink error, void* error_context);
void kvc_spm_free(void* handle);
int kvc_spm_encode(void* handle, const char* text, size_t size, kvc_spm_ids_sink sink, void* context);
int kvc_spm_decode(void* handle, const int* ids, size_t count, kvc_spm_bytes_sink sink, void* context);
int kvc_spm_vocab_size(void* handle);
int kvc_spm_id_to_piece(void* handle, int id, kvc_spm_bytes_sink sink, void* context);
// -1 when the piece is not in the vocabulary.
int kvc_spm_piece_to_id(void* handle, const char* piece, size_t size);
// -1 when the model defines no such token.
int kvc_spm_bos_id(void* handle);
int kvc_spm_eos_id(void* handle);
}
