#pragma once
#include <cstddef>

// Large CPU tensors (weights, KV caches, prefill activations) backed by transparent huge pages, with
// freed large blocks kept for reuse. A decode step streams every weight once, and through 4 KiB pages
// that is a TLB miss per page. A long prefill allocates the same activation shapes in every layer, and
// a fresh mmap for each means page faults that zero every huge page again (kernel page clearing was
// the second-largest entry of a perf profile of an 8K prefill before blocks were reused).
namespace kvc {

// Enough for every activation of a long prefill of a ~1B model; beyond it a freed block goes back to
// the system at once.
constexpr size_t kLargeBlockCacheBytes = size_t{1} << 30;

// Makes LibTorch's CPU allocator ask for huge pages on allocations of 4 MiB or more (madvise; a no-op
// where THP is disabled) and keep up to kLargeBlockCacheBytes of freed large blocks for reuse (a request
// takes the smallest freed block that fits, up to twice its size).
// Idempotent. Memory allocated before stays valid: it is freed as before.
void install_huge_page_allocator();

// Bytes of freed large blocks held for reuse right now (counted in RSS, not in any tensor).
size_t huge_page_allocator_cached_bytes();

}  // namespace kvc
