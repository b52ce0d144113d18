#include "block_kernel_bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/median.h"
#include "io/gguf_dequant.h"
#include "kernels/block_isa.h"
#include "kernels/block_linear.h"
#include "kernels/block_matvec.h"
#include "kernels/decode_attention.h"
#include "kernels/parallel_linear.h"
#include "util/clock.h"

namespace kvc::bench {
namespace {

constexpr BlockType kTypes[] = {BlockType::Q4_0, BlockType::Q4_1, BlockType::Q5_0, BlockType::Q5_1,
                                BlockType::Q8_0, BlockType::Q4_K, BlockType::Q5_K, BlockType::Q6_K};

// Random codes; the half-precision scale fields get finite values of a realistic size.
std::vector<uint8_t> random_blocks(BlockType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const BlockFormat& f = block_format(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * block_row_bytes(f, cols)));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::vector<int> halves = {0};
  if (t == BlockType::Q4_1 || t == BlockType::Q5_1 || t == BlockType::Q4_K || t == BlockType::Q5_K) halves = {0, 2};
  if (t == BlockType::Q6_K) halves = {208};
  for (size_t b = 0; b < bytes.size(); b += static_cast<size_t>(f.bytes)) {
    for (int offset : halves) {
      const uint16_t h = c10::Half(scale(rng)).x;
      std::memcpy(&bytes[b + static_cast<size_t>(offset)], &h, sizeof h);
    }
  }
  return bytes;
}

struct Variant {
  std::string name;
  BlockIsa isa;
  BlockKernelForm form;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  if (best_block_isa() == BlockIsa::Avx512Vnni) {
    out.push_back({"avx512vnni-int8", BlockIsa::Avx512Vnni, BlockKernelForm::Integer});
    out.push_back({"avx512-fp32fma", BlockIsa::Avx512Vnni, BlockKernelForm::Float});
  }
  if (best_block_isa() >= BlockIsa::Avx2) out.push_back({"avx2-int8", BlockIsa::Avx2, BlockKernelForm::Integer});
  out.push_back({"portable", BlockIsa::Portable, BlockKernelForm::Integer});
  return out;
}

void use(const Variant& v, BlockType t) {
  limit_block_isa(v.isa);
  set_block_kernel_form(t, v.form);
}

// Decode attention over f16 caches shaped as two real models' layers, each level in turn: from memory
// (layer caches adding up to 192 MB, each attended once, on every thread) and from cache (one layer of
// 512 entries, 200 times, on one thread). GB/s of keys and values read.
void compare_attention(int repeats, FILE* table, nlohmann::json& out) {
  struct Shape {
    const char* name;
    int64_t heads, kv_heads, head_dim;
  };
  const Shape shapes[] = {{"9/3 heads, d 64 (SmolLM2)", 9, 3, 64}, {"4/1 heads, d 256 (Gemma 3)", 4, 1, 256}};
  std::vector<std::pair<std::string, BlockIsa>> levels;
  if (best_block_isa() == BlockIsa::Avx512Vnni) levels.emplace_back("avx512", BlockIsa::Avx512Vnni);
  if (best_block_isa() >= BlockIsa::Avx2) levels.emplace_back("avx2", BlockIsa::Avx2);
  std::fprintf(table, "\ndecode attention over an f16 cache of 4096 entries per layer (GB/s of keys and values)\n");
  std::fprintf(table, "%-28s %-8s %12s %18s\n", "shape", "level", "memory GB/s", "cache, 1 thread");
  out["attention"] = nlohmann::json::array();
  for (const Shape& shape : shapes) {
    const int64_t entries = 4096, small_entries = 512;
    const int64_t layer_bytes = 2 * shape.kv_heads * entries * shape.head_dim * 2;
    const int64_t layers = std::max<int64_t>(1, (int64_t{192} << 20) / layer_bytes);
    std::vector<at::Tensor> keys, values;
    for (int64_t l = 0; l < layers; ++l) {
      keys.push_back(at::randn({shape.kv_heads, entries, shape.head_dim}).to(at::kHalf));
      values.push_back(at::randn({shape.kv_heads, entries, shape.head_dim}).to(at::kHalf));
    }
    const at::Tensor positions = at::arange(entries, at::kLong).unsqueeze(0).repeat({shape.kv_heads, 1});
    const at::Tensor small_keys = keys[0].narrow(1, 0, small_entries).contiguous(),
                     small_values = values[0].narrow(1, 0, small_entries).contiguous(),
                     small_positions = positions.narrow(1, 0, small_entries).contiguous();
    const at::Tensor q = at::randn({shape.heads, 1, shape.head_dim});
    std::vector<std::vector<double>> mem(levels.size()), cache(levels.size());
    for (int r = 0; r < repeats; ++r) {
      for (size_t v = 0; v < levels.size(); ++v) {
        limit_block_isa(levels[v].second);
        const auto t0 = SteadyClock::now();
        for (int64_t l = 0; l < layers; ++l) fast_decode_attention(q, entries, keys[l], values[l], positions, 0);
        mem[v].push_back(static_cast<double>(layer_bytes * layers) / seconds_since(t0) / 1e9);
        const int threads = at::get_num_threads();
        at::set_num_threads(1);
        const int inner = 200;
        const auto t1 = SteadyClock::now();
        for (int i = 0; i < inner; ++i)
          fast_decode_attention(q, small_entries, small_keys, small_values, small_positions, 0);
        cache[v].push_back(static_cast<double>(layer_bytes / entries * small_entries) * inner / seconds_since(t1) /
                           1e9);
        at::set_num_threads(threads);
      }
    }
    limit_block_isa(BlockIsa::Avx512Vnni);
    for (size_t v = 0; v < levels.size(); ++v) {
      const double m = kvc::median_of(mem[v]), c = kvc::median_of(cache[v]);
      std::fprintf(table, "%-28s %-8s %12.1f %18.1f\n", shape.name, levels[v].first.c_str(), m, c);
      out["attention"].push_back(
          {{"shape", shape.name}, {"level", levels[v].first}, {"memory_gbs", m}, {"cache_gbs", c}});
    }
  }
}

}  // namespace

nlohmann::json compare_block_kernels(int repeats, int64_t tokens, FILE* table) {
  std::mt19937 rng(1);
  const int64_t cols = 2048;
  nlohmann::json out = {{"cols", cols},
                        {"repeats", repeats},
                        {"tokens", tokens},
                        {"threads", at::get_num_threads()},
                        {"best_isa", block_isa_name(best_block_isa())},
                        {"matvec", nlohmann::json::array()},
                        {"prefill", nlohmann::json::array()}};
  const std::vector<Variant> all = variants();
  std::fprintf(table,
               "matrix-vector products, %lld columns, %d threads, medians of %d alternated rounds (GB/s of blocks)\n",
               static_cast<long long>(cols), at::get_num_threads(), repeats);
  std::fprintf(table, "%-6s %-18s %12s %18s\n", "type", "kernel", "memory GB/s", "cache, 1 thread");
  for (BlockType t : kTypes) {
    const BlockFormat& f = block_format(t);
    const int64_t row_bytes = block_row_bytes(f, cols);
    // From memory: 192 MB, six times the last-level cache of the machines measured, on every thread;
    // from cache: 512 KB, on one thread (the kernel's own rate, without the threads' start).
    const int64_t big_rows = (int64_t{192} << 20) / row_bytes, small_rows = (int64_t{512} << 10) / row_bytes;
    const std::vector<uint8_t> big = random_blocks(t, big_rows, cols, rng),
                               small = random_blocks(t, small_rows, cols, rng);
    BlockMatrix big_m(cols, nullptr), small_m(cols, nullptr);
    big_m.append(t, big.data(), big_rows);
    small_m.append(t, small.data(), small_rows);
    const at::Tensor x = at::randn({cols});
    const BlockKernelForm before = block_kernel_form(t);
    std::vector<std::vector<double>> mem(all.size()), cache(all.size());
    for (int r = 0; r < repeats; ++r) {
      for (size_t v = 0; v < all.size(); ++v) {
        use(all[v], t);
        if (all[v].isa != BlockIsa::Portable) {
          const auto t0 = SteadyClock::now();
          block_matvec(big_m, x);
          mem[v].push_back(static_cast<double>(big_m.bytes()) / seconds_since(t0) / 1e9);
        }
        const int inner = all[v].isa == BlockIsa::Portable ? 20 : 200;
        const int threads = at::get_num_threads();
        at::set_num_threads(1);
        const auto t1 = SteadyClock::now();
        for (int i = 0; i < inner; ++i) block_matvec(small_m, x);
        cache[v].push_back(static_cast<double>(small_m.bytes()) * inner / seconds_since(t1) / 1e9);
        at::set_num_threads(threads);
      }
    }
    for (size_t v = 0; v < all.size(); ++v) {
      const double m = kvc::median_of(mem[v]), c = kvc::median_of(cache[v]);
      std::fprintf(table, "%-6s %-18s %12s %18.1f\n", f.name, all[v].name.c_str(),
                   m > 0 ? fmt::format("{:.1f}", m).c_str() : "-", c);
      out["matvec"].push_back({{"type", f.name}, {"kernel", all[v].name}, {"memory_gbs", m}, {"cache_gbs", c}});
    }
    limit_block_isa(BlockIsa::Avx512Vnni);
    set_block_kernel_form(t, before);
  }
  std::fprintf(table,
               "\nprefill products, %lld tokens x %lld columns x 2048 rows (GFLOP/s; fp32: the dequantized matrix "
               "through parallel_linear)\n",
               static_cast<long long>(tokens), static_cast<long long>(cols));
  std::fprintf(table, "%-6s %12s %12s %8s\n", "type", "blocks", "fp32", "ratio");
  const double flops = 2.0 * static_cast<double>(tokens) * cols * 2048;
  const at::Tensor x = at::randn({tokens, cols});
  for (BlockType t : kTypes) {
    const BlockFormat& f = block_format(t);
    const std::vector<uint8_t> blocks = random_blocks(t, 2048, cols, rng);
    BlockMatrix m(cols, nullptr);
    m.append(t, blocks.data(), 2048);
    at::Tensor dense = at::empty({2048, cols});
    gguf::dequantize(static_cast<uint32_t>(t), blocks.data(), static_cast<uint64_t>(2048 * cols),
                     dense.data_ptr<float>());
    std::vector<double> block_rate, dense_rate;
    for (int r = 0; r < repeats; ++r) {
      auto t0 = SteadyClock::now();
      block_linear(m, x);
      block_rate.push_back(flops / seconds_since(t0) / 1e9);
      t0 = SteadyClock::now();
      parallel_linear(x, dense, {});
      dense_rate.push_back(flops / seconds_since(t0) / 1e9);
    }
    const double b = kvc::median_of(block_rate), d = kvc::median_of(dense_rate);
    std::fprintf(table, "%-6s %12.1f %12.1f %8.2f\n", f.name, b, d, b / d);
    out["prefill"].push_back({{"type", f.name}, {"blocks_gflops", b}, {"fp32_gflops", d}});
  }
  compare_attention(repeats, table, out);
  return out;
}

}  // namespace kvc::bench
