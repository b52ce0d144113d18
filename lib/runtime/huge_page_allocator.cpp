#include "runtime/huge_page_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/mman.h>
#include <torch/version.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kvc {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kThreshold = size_t{4} << 20;

// Freed large blocks by size, and the size of every large block handed out (to recognise it on free).
class LargeBlockPool {
 public:
  void* take(size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest freed block that fits, up to twice the size: layers whose activations differ in
      // size (per-layer budgets, the part of a causal prefix a block sees) still reuse faulted-in pages.
      auto it = free_.lower_bound(rounded);  // sizes with no freed block are erased
      if (it != free_.end() && it->first <= 2 * rounded) {
        const size_t size = it->first;
        void* data = it->second.back();
        it->second.pop_back();
        if (it->second.empty()) free_.erase(it);
        cached_bytes_ -= size;
        live_[data] = size;
        return data;
      }
    }
    void* data = nullptr;
    if (posix_memalign(&data, kHugePage, rounded) != 0) return nullptr;
    madvise(data, rounded, MADV_HUGEPAGE);  // advisory: failure just means small pages
    std::lock_guard<std::mutex> lock(mutex_);
    live_[data] = rounded;
    return data;
  }

  // False when `data` is not a large block of this pool (allocated elsewhere or before installation).
  bool give_back(void* data) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(data);
    if (it == live_.end()) return false;
    const size_t rounded = it->second;
    live_.erase(it);
    if (cached_bytes_ + rounded <= kLargeBlockCacheBytes) {
      free_[rounded].push_back(data);
      cached_bytes_ += rounded;
    } else {
      std::free(data);
    }
    return true;
  }

  size_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, size_t> live_;
  size_t cached_bytes_ = 0;
};

LargeBlockPool& pool() {
  static auto* instance = new LargeBlockPool();  // never destroyed: tensors may be freed during exit
  return *instance;
}

void free_block(void* data) {
  if (data == nullptr) return;
  if (!pool().give_back(data)) c10::free_cpu(data);
}

// LibTorch 2.3 made Allocator::allocate non-const and added a pure copy_data.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define KVC_ALLOCATE_CONST
#else
#define KVC_ALLOCATE_CONST const
#endif

class HugePageAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) KVC_ALLOCATE_CONST override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes >= kThreshold) {
      if (void* data = pool().take((nbytes + kHugePage - 1) / kHugePage * kHugePage)) {
        return {data, data, &free_block, cpu};
      }
    }
    void* data = c10::alloc_cpu(nbytes);       // LibTorch's own path (posix_memalign + free), throws on OOM
    return {data, data, &c10::free_cpu, cpu};  // small blocks skip the pool's lookup on free
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif
};

}  // namespace

void install_huge_page_allocator() {
  static HugePageAllocator allocator;
  static std::once_flag once;
  std::call_once(once, [] { c10::SetCPUAllocator(&allocator, /*priority=*/1); });
}

size_t huge_page_allocator_cached_bytes() { return pool().cached_bytes(); }

}  // namespace kvc
