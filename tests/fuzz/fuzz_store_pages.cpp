// Store pages under PageStore::verify: the input is a whole store file, checked against the manifest of
// a small store built once at start-up (two clusters sharing a pool, a dropped one leaving stale pages).
// The input's generation field is replaced by the manifest's, so mutations reach the pages behind it.
// KVC_FUZZ_WRITE_SEED=<file> writes that store as a seed and exits.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_input.h"
#include "retrieval/page_store.h"
#include "util/error.h"

namespace {

using kvc::retrieval::EntryBlock;
using kvc::retrieval::Layout;
using kvc::retrieval::PageStore;
using kvc::retrieval::StoreManifest;

constexpr int64_t kDim = 8;

EntryBlock block(int64_t n, int64_t first_position, float scale) {
  EntryBlock b(kDim);
  std::vector<float> k(kDim), v(kDim);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < kDim; ++j) {
      k[j] = scale * static_cast<float>(i + j);
      v[j] = -scale * static_cast<float>(i * j);
    }
    b.push(k.data(), v.data(), first_position + i);
  }
  return b;
}

StoreManifest g_manifest;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char path[] = "/tmp/kvc-fuzz-store-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) std::abort();
  ::close(fd);
  std::vector<char> bytes;
  {
    PageStore store(path, kDim, Layout::kDualHead, /*direct_io=*/false);
    const int64_t pp = store.per_page();
    const int64_t a = store.create(block(2 * pp + 3, 0, 1.0f));
    store.create(block(5, 500, 2.0f), a);
    const int64_t c = store.create(block(pp + 1, 900, 3.0f));
    store.drop(c);
    g_manifest = store.commit();
  }
  std::ifstream in(path, std::ios::binary);
  bytes.assign(std::istreambuf_iterator<char>(in), {});
  ::unlink(path);
  if (const char* seed = std::getenv("KVC_FUZZ_WRITE_SEED")) {
    std::ofstream(seed, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= 16) std::memcpy(bytes.data() + 8, &g_manifest.generation, 8);
  kvc::fuzz::InputFile input(bytes.data(), bytes.size());
  try {
    PageStore::verify(input.path(), g_manifest);
  } catch (const kvc::Error& e) {
    kvc::fuzz::rejected(e);
  }
  return 0;
}
