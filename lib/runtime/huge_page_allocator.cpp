#include "runtime/huge_page_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <sys/mman.h>

#include <cstdlib>
#include <mutex>

namespace kvc {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kThreshold = size_t{4} << 20;

class HugePageAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) const override {
    const c10::Device cpu(c10::DeviceType::CPU);
    void* data = nullptr;
    if (nbytes >= kThreshold) {
      const size_t rounded = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
      if (posix_memalign(&data, kHugePage, rounded) == 0) {
        madvise(data, rounded, MADV_HUGEPAGE);  // advisory: failure just means small pages
        return {data, data, &c10::free_cpu, cpu};
      }
    }
    data = c10::alloc_cpu(nbytes);  // LibTorch's own path (posix_memalign + free), throws on OOM
    return {data, data, &c10::free_cpu, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::free_cpu; }
};

}  // namespace

void install_huge_page_allocator() {
  static HugePageAllocator allocator;
  static std::once_flag once;
  std::call_once(once, [] { c10::SetCPUAllocator(&allocator, /*priority=*/1); });
}

}  // namespace kvc
