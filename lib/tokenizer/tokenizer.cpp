#include "tokenizer/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>

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
};

// AddressSanitizer refuses RTLD_DEEPBIND; sanitizer builds link the shim's protobuf normally.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kDeepBind = 0;
#else
constexpr int kDeepBind = RTLD_DEEPBIND;
#endif

std::string executable_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

// The shim sits beside the executables (build/bin); KVC_SPM_SHIM overrides for unusual layouts.
std::string find_shim() {
  if (const char* env = std::getenv("KVC_SPM_SHIM")) return env;
  const std::string beside = executable_dir() + "/libkvc_spm.so";
  if (file_exists(beside)) return beside;
  return KVC_SPM_BUILD_PATH;
}

const ShimApi& shim() {
  static ShimApi api;
  static std::once_flag once;
  static std::string load_error;
  std::call_once(once, [] {
    const std::string path = find_shim();
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | kDeepBind);
    if (lib == nullptr) {
      load_error = fmt::format("cannot open the tokenizer library '{}': {} (set KVC_SPM_SHIM to its path)", path,
                               ::dlerror());
      return;
    }
    api.load = reinterpret_cast<decltype(api.load)>(::dlsym(lib, "kvc_spm_load"));
    api.free = reinterpret_cast<decltype(api.free)>(::dlsym(lib, "kvc_spm_free"));
    api.encode = reinterpret_cast<decltype(api.encode)>(::dlsym(lib, "kvc_spm_encode"));
    api.decode = reinterpret_cast<decltype(api.decode)>(::dlsym(lib, "kvc_spm_decode"));
    api.vocab_size = reinterpret_cast<decltype(api.vocab_size)>(::dlsym(lib, "kvc_spm_vocab_size"));
    api.id_to_piece = reinterpret_cast<decltype(api.id_to_piece)>(::dlsym(lib, "kvc_spm_id_to_piece"));
    if (!api.load || !api.free || !api.encode || !api.decode || !api.vocab_size || !api.id_to_piece) {
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

}  // namespace

struct Tokenizer::Impl {
  void* handle = nullptr;
  std::string path;
  ~Impl() {
    if (handle) shim().free(handle);
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& model_path) {
  KVC_CHECK(file_exists(model_path), "tokenizer not found: '{}'", model_path);
  KVC_CHECK(!is_directory(model_path), "tokenizer path '{}' is a folder; expected a tokenizer.model file", model_path);
  const auto& api = shim();
  std::string error;
  void* handle = api.load(model_path.c_str(), append_bytes, &error);
  KVC_CHECK(handle != nullptr, "'{}' is not a SentencePiece model ({})", model_path, error);
  auto impl = std::make_unique<Impl>();
  impl->handle = handle;
  impl->path = model_path;
  return Tokenizer(std::move(impl));
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  KVC_CHECK(shim().encode(impl_->handle, text.data(), text.size(), append_ids, &ids) == 0,
            "tokenizer '{}' failed to encode the text", impl_->path);
  return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  const int vocab = vocab_size();
  for (int id : ids) KVC_CHECK(id >= 0 && id < vocab, "token id {} is outside the vocabulary (size {})", id, vocab);
  std::string text;
  KVC_CHECK(shim().decode(impl_->handle, ids.data(), ids.size(), append_bytes, &text) == 0,
            "tokenizer '{}' failed to decode", impl_->path);
  return text;
}

std::string Tokenizer::piece(int id) const {
  std::string text;
  KVC_CHECK(shim().id_to_piece(impl_->handle, id, append_bytes, &text) == 0, "token id {} is outside the vocabulary",
            id);
  return text;
}

int Tokenizer::vocab_size() const { return shim().vocab_size(impl_->handle); }

void StreamDecoder::prime(const std::vector<int>& shown_ids) {
  constexpr size_t kWindow = 8;
  const size_t start = shown_ids.size() > kWindow ? shown_ids.size() - kWindow : 0;
  context_.assign(shown_ids.begin() + static_cast<std::ptrdiff_t>(start), shown_ids.end());
  pending_.clear();
}

std::string StreamDecoder::push(int id) {
  // Decode a short window of recent ids with and without the new one and emit the difference: the
  // window keeps SentencePiece's leading-space rule and byte-fallback pieces right, in O(1) per token.
  constexpr size_t kWindow = 8;
  pending_.push_back(id);
  std::vector<int> window(context_.begin(), context_.end());
  const std::string before = tokenizer_.decode(window);
  window.insert(window.end(), pending_.begin(), pending_.end());
  const std::string after = tokenizer_.decode(window);
  // A trailing U+FFFD means a multi-byte character is still incomplete: wait for more pieces.
  if (after.size() >= 3 && after.compare(after.size() - 3, 3, "\xEF\xBF\xBD") == 0 && pending_.size() < 4) return {};
  std::string fresh = after.compare(0, before.size(), before) == 0 ? after.substr(before.size()) : after;
  for (int p : pending_) context_.push_back(p);
  pending_.clear();
  while (context_.size() > kWindow) context_.erase(context_.begin());
  return fresh;
}

}  // namespace kvc
