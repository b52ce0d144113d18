#include "tokenizer/sentencepiece_backend.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "tokenizer/special_token_flags.h"
#include "tokenizer/spm_model_check.h"
#include "tokenizer/spm_shim.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc {
namespace {

struct ShimApi {
  decltype(&kvc_spm_load) load = nullptr;
  decltype(&kvc_spm_free) free = nullptr;
  decltype(&kvc_spm_encode) encode = nullptr;
  decltype(&kvc_spm_decode) decode = nullptr;
  decltype(&kvc_spm_vocab_size) vocab_size = nullptr;
  decltype(&kvc_spm_id_to_piece) id_to_piece = nullptr;
  decltype(&kvc_spm_piece_to_id) piece_to_id = nullptr;
  decltype(&kvc_spm_bos_id) bos_id = nullptr;
  decltype(&kvc_spm_eos_id) eos_id = nullptr;
};

// AddressSanitizer refuses RTLD_DEEPBIND. Sanitizer builds open the (uninstrumented) shim in a link
// namespace of its own instead: sentencepiece's protobuf stays apart from LibTorch's just the same, and the
// C interface passes no memory that one side allocates and the other frees.
void* open_shim(const std::string& path) {
#if defined(__SANITIZE_ADDRESS__)
  return ::dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
  return ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
}

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// The shim sits beside the executables in a build (build/bin) and in PREFIX/lib/kvc once installed
// (tools in PREFIX/bin); KVC_SPM_SHIM overrides for unusual layouts.
std::string find_shim() {
  if (const char* env = std::getenv("KVC_SPM_SHIM")) return env;
  const std::string dir = executable_dir();
  for (const std::string& candidate : {dir + "/libkvc_spm.so", dir + "/../lib/kvc/libkvc_spm.so"})
    if (file_exists(candidate)) return candidate;
  return KVC_SPM_BUILD_PATH;
}

template <typename Fn>
void bind(void* lib, const char* name, Fn& slot) {
  slot = reinterpret_cast<Fn>(::dlsym(lib, name));
}

const ShimApi& shim() {
  static ShimApi api;
  static std::once_flag once;
  static std::string load_error;
  std::call_once(once, [] {
    const std::string path = find_shim();
    void* lib = open_shim(path);
    if (lib == nullptr) {
      load_error =
          fmt::format("cannot open the tokenizer library '{}': {} (set KVC_SPM_SHIM to its path)", path, ::dlerror());
      return;
    }
    bind(lib, "kvc_spm_load", api.load);
    bind(lib, "kvc_spm_free", api.free);
    bind(lib, "kvc_spm_encode", api.encode);
    bind(lib, "kvc_spm_decode", api.decode);
    bind(lib, "kvc_spm_vocab_size", api.vocab_size);
    bind(lib, "kvc_spm_id_to_piece", api.id_to_piece);
    bind(lib, "kvc_spm_piece_to_id", api.piece_to_id);
    bind(lib, "kvc_spm_bos_id", api.bos_id);
    bind(lib, "kvc_spm_eos_id", api.eos_id);
    if (!api.load || !api.free || !api.encode || !api.decode || !api.vocab_size || !api.id_to_piece ||
        !api.piece_to_id || !api.bos_id || !api.eos_id) {
      load_error = fmt::format("tokenizer library '{}' lacks the kvc_spm_* functions; rebuild kvc", path);
      api = ShimApi{};
    }
  });
  KVC_CHECK(api.load != nullptr, "{}", load_error);
  return api;
}

void append_bytes(void* context, const char* data, size_t size) {
  static_cast<std::string*>(context)->append(data, size);
}
void append_ids(void* context, const int* ids, size_t count) {
  static_cast<std::vector<int>*>(context)->assign(ids, ids + count);
}

class SentencePieceBackend final : public TokenizerBackend {
 public:
  SentencePieceBackend(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {
    // Llama-2-era models add BOS and nothing else unless tokenizer_config.json beside the file says otherwise.
    if (const auto bos = bos_id()) prefix_.push_back(*bos);
    const auto eos = eos_ids();
    apply_add_special_flags(read_add_special_flags(std::filesystem::path(path_).parent_path().string()), bos_id(),
                            eos.empty() ? std::nullopt : std::optional<int>(eos.front()), prefix_, suffix_, path_);
  }
  ~SentencePieceBackend() override { shim().free(handle_); }
  SentencePieceBackend(const SentencePieceBackend&) = delete;
  SentencePieceBackend& operator=(const SentencePieceBackend&) = delete;

  std::vector<int> encode(const std::string& text) const override {
    std::vector<int> ids;
    KVC_CHECK(shim().encode(handle_, text.data(), text.size(), append_ids, &ids) == 0,
              "tokenizer '{}' failed to encode the text", path_);
    return ids;
  }

  std::string decode(const std::vector<int>& ids) const override {
    const int vocab = vocab_size();
    for (int id : ids) KVC_CHECK(id >= 0 && id < vocab, "token id {} is outside the vocabulary (size {})", id, vocab);
    std::string text;
    KVC_CHECK(shim().decode(handle_, ids.data(), ids.size(), append_bytes, &text) == 0,
              "tokenizer '{}' failed to decode", path_);
    return text;
  }

  std::string piece(int id) const override {
    std::string text;
    KVC_CHECK(shim().id_to_piece(handle_, id, append_bytes, &text) == 0, "token id {} is outside the vocabulary", id);
    return text;
  }

  std::optional<int> piece_to_id(const std::string& piece) const override {
    const int id = shim().piece_to_id(handle_, piece.data(), piece.size());
    if (id < 0) return std::nullopt;
    return id;
  }

  int vocab_size() const override { return shim().vocab_size(handle_); }

  std::optional<int> bos_id() const override {
    const int id = shim().bos_id(handle_);
    if (id < 0) return std::nullopt;
    return id;
  }
  std::vector<int> eos_ids() const override {
    const int id = shim().eos_id(handle_);
    if (id < 0) return {};
    return {id};
  }
  std::vector<int> prefix_ids() const override { return prefix_; }
  std::vector<int> suffix_ids() const override { return suffix_; }
  // BOS and EOS: what a rendered chat template spells out ("<s>[INST] ...").
  std::vector<int> control_ids() const override {
    std::vector<int> ids;
    if (const auto bos = bos_id()) ids.push_back(*bos);
    for (int id : eos_ids()) ids.push_back(id);
    return ids;
  }

  std::string kind() const override { return "sentencepiece"; }
  std::string source() const override { return path_; }

 private:
  void* handle_;
  std::string path_;
  std::vector<int> prefix_, suffix_;
};

}  // namespace

std::unique_ptr<TokenizerBackend> load_sentencepiece(const std::string& model_path) {
  KVC_CHECK(file_exists(model_path), "tokenizer not found: '{}'", model_path);
  KVC_CHECK(!is_directory(model_path), "tokenizer path '{}' is a folder; expected a tokenizer.model file", model_path);
  std::error_code ec;
  KVC_CHECK(std::filesystem::is_regular_file(model_path, ec), "tokenizer '{}' is not a regular file", model_path);
  check_sentencepiece_model(read_text_file(model_path), model_path);  // before the library trusts it
  const auto& api = shim();
  std::string error;
  void* handle = api.load(model_path.c_str(), append_bytes, &error);
  KVC_CHECK(handle != nullptr, "'{}' is not a SentencePiece model ({})", model_path, error);
  return std::make_unique<SentencePieceBackend>(handle, model_path);
}

}  // namespace kvc
