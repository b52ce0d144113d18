#include "cache/cache_types.h"

#include "io/gguf_dequant.h"
#include "io/gguf_quantize.h"
#include "util/error.h"

namespace kvc {
namespace {

uint32_t ggml_type(at::ScalarType type) { return type == kCacheQ8_0 ? gguf::kTypeQ8_0 : gguf::kTypeQ4_0; }

}  // namespace

CacheTypes CacheTypes::resolved(at::ScalarType activations) const {
  return {keys == at::ScalarType::Undefined ? activations : keys,
          values == at::ScalarType::Undefined ? activations : values};
}

at::ScalarType parse_cache_type(const std::string& name, const std::string& flag) {
  if (name == "auto") return at::ScalarType::Undefined;
  if (name == "f32") return at::kFloat;
  if (name == "f16") return at::kHalf;
  if (name == "bf16") return at::kBFloat16;
  if (name == "q8_0") return kCacheQ8_0;
  if (name == "q4_0") return kCacheQ4_0;
  fail("{}: unknown cache type '{}' (expected f32, f16, bf16, q8_0 or q4_0)", flag, name);
}

void check_cache_types_fit(CacheTypes types, int64_t head_dim, const at::Device& device) {
  if (!types.any_block_format()) return;
  const std::string names = cache_type_name(types.keys) + " / " + cache_type_name(types.values);
  KVC_CHECK(head_dim % kRowBlockValues == 0,
            "--cache-type-k/-v {}: blocks hold {} values, but this model's head_dim is {}; use f16 or bf16", names,
            kRowBlockValues, head_dim);
  KVC_CHECK(device.is_cpu(), "--cache-type-k/-v {}: block formats are kept on the CPU only; use f16 or bf16 on {}",
            names, device.str());
}

std::string cache_type_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "f32";
    case at::kHalf: return "f16";
    case at::kBFloat16: return "bf16";
    case at::kDouble: return "f64";
    case kCacheQ8_0: return "q8_0";
    case kCacheQ4_0: return "q4_0";
    default: return c10::toString(type);
  }
}

at::Tensor encode_rows(const at::Tensor& rows, at::ScalarType type) {
  if (!is_block_format(type)) return rows.to(type);
  if (rows.scalar_type() == at::kByte) return rows;
  const int64_t d = rows.size(-1);
  KVC_CHECK(d % kRowBlockValues == 0, "a {} cache needs head_dim to be a multiple of {}, got {}", cache_type_name(type),
            kRowBlockValues, d);
  KVC_CHECK(rows.device().is_cpu(), "a {} cache is kept on the CPU only", cache_type_name(type));
  const at::Tensor x = rows.to(at::kFloat).contiguous();
  std::vector<int64_t> shape = rows.sizes().vec();
  shape.back() = stored_row_width(type, d);
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kByte));
  gguf::quantize(ggml_type(type), x.data_ptr<float>(), static_cast<uint64_t>(x.numel()), out.data_ptr<uint8_t>());
  return out;
}

at::Tensor decode_rows(const at::Tensor& stored, at::ScalarType type, int64_t d, at::ScalarType out) {
  if (!is_block_format(type)) return stored.to(out);
  const at::Tensor blocks = stored.contiguous();
  std::vector<int64_t> shape = stored.sizes().vec();
  shape.back() = d;
  at::Tensor values = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  gguf::dequantize(ggml_type(type), blocks.data_ptr<uint8_t>(), static_cast<uint64_t>(values.numel()),
                   values.data_ptr<float>());
  return values.to(out);
}

}  // namespace kvc
