// The CPU allocator installed for models: freed large blocks are reused, the cache is bounded, and
// small or foreign blocks are untouched.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <vector>

#include "runtime/huge_page_allocator.h"

namespace {

constexpr int64_t kLargeFloats = int64_t{3} << 20;  // 12 MiB: above the 4 MiB huge-page threshold

TEST(HugePageAllocator, ReusesAFreedLargeBlockOfTheSameSize) {
  kvc::install_huge_page_allocator();
  const size_t cached_before = kvc::huge_page_allocator_cached_bytes();
  void* first = nullptr;
  {
    at::Tensor a = at::full({kLargeFloats}, 3.0f);
    first = a.data_ptr();
  }
  EXPECT_EQ(kvc::huge_page_allocator_cached_bytes(), cached_before + kLargeFloats * 4);
  at::Tensor b = at::empty({kLargeFloats});
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(kvc::huge_page_allocator_cached_bytes(), cached_before);
  // The reused block is ordinary memory: writes and reads round-trip.
  b.fill_(-2.0f);
  EXPECT_EQ(b.sum().item<float>(), -2.0f * kLargeFloats);
}

TEST(HugePageAllocator, DifferentSizesDoNotShareBlocks) {
  kvc::install_huge_page_allocator();
  void* first = nullptr;
  {
    at::Tensor a = at::empty({kLargeFloats});
    first = a.data_ptr();
  }
  at::Tensor c = at::empty({2 * kLargeFloats});
  EXPECT_NE(c.data_ptr(), first);
  at::Tensor d = at::empty({kLargeFloats});
  EXPECT_EQ(d.data_ptr(), first);
}

// Layers whose activations differ in size reuse faulted-in blocks: the smallest freed block that fits,
// up to twice the request; a block more than twice as large stays for a request it suits.
TEST(HugePageAllocator, ASmallerRequestReusesABlockUpToTwiceItsSize) {
  kvc::install_huge_page_allocator();
  void* block = nullptr;
  { block = at::empty({2 * kLargeFloats}).data_ptr(); }  // 24 MiB, freed into the cache
  {
    at::Tensor too_small = at::empty({kLargeFloats / 2});  // 6 MiB: the 24 MiB block is over twice that
    EXPECT_NE(too_small.data_ptr(), block);
  }
  const size_t cached = kvc::huge_page_allocator_cached_bytes();
  at::Tensor fits = at::empty({kLargeFloats + 1000});  // just over 12 MiB: within twice
  EXPECT_EQ(fits.data_ptr(), block);
  // The whole block left the cache, not just the requested size.
  EXPECT_EQ(kvc::huge_page_allocator_cached_bytes(), cached - 2 * kLargeFloats * 4);
  fits.fill_(1.0f);
  EXPECT_EQ(fits.sum().item<float>(), static_cast<float>(kLargeFloats + 1000));
}

TEST(HugePageAllocator, SmallBlocksAreNotCached) {
  kvc::install_huge_page_allocator();
  const size_t cached_before = kvc::huge_page_allocator_cached_bytes();
  { at::Tensor small = at::ones({1024}); }
  EXPECT_EQ(kvc::huge_page_allocator_cached_bytes(), cached_before);
}

TEST(HugePageAllocator, CacheStaysWithinItsBound) {
  kvc::install_huge_page_allocator();
  {
    // Address space only: the blocks are never touched, so no memory is committed.
    std::vector<at::Tensor> blocks;
    const int64_t floats = static_cast<int64_t>(kvc::kLargeBlockCacheBytes / 4 / 3);
    for (int i = 0; i < 5; ++i) blocks.push_back(at::empty({floats}));
  }
  EXPECT_LE(kvc::huge_page_allocator_cached_bytes(), kvc::kLargeBlockCacheBytes);
  EXPECT_GE(kvc::huge_page_allocator_cached_bytes(), 2 * (kvc::kLargeBlockCacheBytes / 3));
}

}  // namespace
