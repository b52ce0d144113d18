// --device cuda against the float64 reference and against the CPU path, in float32. Every test skips
// when this LibTorch has no CUDA or no GPU is visible (CI runs on CPU).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#ifdef KVC_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#endif

#include "compression/compression_spec.h"
#include "generation/generation.h"
#include "io/safetensors.h"
#include "lowrank/lowrank_artifacts.h"
#include "lowrank/lowrank_layer_cache.h"
#include "model/llama_model.h"
#include "model/tensor_bridge.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

std::vector<int> to_ids(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA in this LibTorch or no GPU visible";
  }
  static auto load(const std::string& device, const std::string& name = "stories260K") {
    return LlamaModel::load(test::model_dir(name), LoadOptions{device, "float32"});
  }
};

TEST_F(CudaTest, LogitsMatchReference) {
  for (const std::string name : {"stories260K", "kvc-micro-lm"}) {
    auto file = st::SafetensorsFile::open(test::reference_dir(name) + "/reference.safetensors");
    const at::Tensor prompt = load_tensor(file, "prompt_ids").clone(), ref = load_tensor(file, "logits").clone();
    auto model = load("cuda", name);
    KVCache cache = model->new_cache();
    const at::Tensor logits = model->forward(to_ids(prompt), cache);
    ASSERT_TRUE(logits.device().is_cuda());
    // cuBLAS sums in another order than the float64 reference: float32 rounding only.
    EXPECT_LT((logits.cpu().to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>(), 1e-3) << name;
  }
}

TEST_F(CudaTest, GreedyContinuationMatchesReference) {
  auto file = st::SafetensorsFile::open(test::reference_dir("stories260K") + "/reference.safetensors");
  auto model = load("cuda");
  KVCache cache = model->new_cache();
  GenerationRequest request;
  request.prompt = to_ids(load_tensor(file, "greedy_prompt_ids"));
  const std::vector<int> want = to_ids(load_tensor(file, "greedy_continuation_ids"));
  request.max_new_tokens = static_cast<int64_t>(want.size());
  request.stop_at_eos = false;
  EXPECT_EQ(generate(*model, cache, request).tokens, want);
}

// Prefill, then teacher-forced decoding: the logits of every step, on the CPU.
std::vector<at::Tensor> decode_logits(const LlamaModel& model, const CacheSetup& setup, int64_t prompt, int64_t steps) {
  std::vector<int> ids;
  for (int64_t i = 0; i < prompt + steps; ++i) ids.push_back(static_cast<int>(1 + (i * 37) % 500));
  KVCache cache = setup.new_cache(model);
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  std::vector<at::Tensor> rows{model.forward(std::vector<int>(ids.begin(), ids.begin() + prompt), cache, o).cpu()};
  for (int64_t i = prompt; i < prompt + steps; ++i) rows.push_back(model.forward({ids[i]}, cache, o).cpu());
  return rows;
}

double max_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  return (at::cat(a) - at::cat(b)).abs().max().item<double>();
}

TEST_F(CudaTest, CompressedDecodingMatchesCpu) {
  auto cpu = load("cpu"), gpu = load("cuda");
  const ModelConfig& c = cpu->config();
  // A fixed-rank basis (the uniform-rank store) for the low-rank cache.
  lowrank::Artifact a;
  a.kind = lowrank::kBasesKind;
  at::manual_seed(5);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor U = std::get<0>(at::linalg_qr(at::randn({c.kv_dim(), c.kv_dim()}, at::kDouble))).to(at::kFloat);
    const at::Tensor ev = at::ones({c.kv_dim()}, at::kDouble);
    a.layers.push_back({{U, {}, {}, ev}, {U, {}, {}, ev}, {U, {}, {}, ev}});
  }
  const std::string bases = test::make_temp_dir("cuda_lowrank") + "/bases.safetensors";
  lowrank::write_artifact(bases, a, c);
  // Gated ranks (the device layout of the store on the GPU, the host layout on the CPU).
  lowrank::Artifact g;
  g.kind = lowrank::kGatesKind;
  g.tau = 0.5;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor W = at::randn({c.kv_dim(), c.kv_dim()}) * 40, b = at::zeros({c.kv_dim()});
    g.layers.push_back({{a.layers[l].key.U, W, b, {}}, {a.layers[l].key.U, W, b, {}}});
  }
  const std::string gates =
      bases.substr(0, bases.size() - std::string("bases.safetensors").size()) + "gates.safetensors";
  lowrank::write_artifact(gates, g, c);
  struct Case {
    std::string press;
    double ratio;
    std::string lowrank;
    int64_t rank;
    std::string retrieval = "";
  };
  // Every registered press: the bounded ones (streaming_llm, h2o, tova, d2o) evict one entry per step
  // while decoding (DenseLayerCache::evict_one; d2o also merges it); the per-head ones (ada,
  // kvcompose_unstructured) use the ragged cache; the low-rank cache with pre-RoPE and rotated keys.
  const Case cases[] = {{"none", 0, "", 0},
                        {"snapkv", 0.5, "", 0},
                        {"streaming_llm", 0.5, "", 0},
                        {"h2o", 0.5, "", 0},
                        {"tova", 0.5, "", 0},
                        {"pyramidkv", 0.5, "", 0},
                        {"knorm", 0.5, "", 0},
                        {"random", 0.5, "", 0},
                        {"dynamickv", 0.5, "", 0},
                        {"d2o", 0.5, "", 0},
                        {"kvcompose", 0.5, "", 0},
                        {"kvcompose_unstructured", 0.5, "", 0},
                        {"ada", 0.5, "", 0},
                        {"none", 0, bases, c.kv_dim() / 2},
                        {"none", 0, bases + ":keys=rotated", c.kv_dim() / 2},
                        {"snapkv:heads=shared", 0.5, bases, c.kv_dim() / 2},
                        {"none", 0, gates, 0},
                        {"snapkv:heads=shared", 0.5, gates, 0},
                        // The cache in RAM and on storage, chosen on the host, attended on the device.
                        {"none", 0, "", 0, "adaptive:budget=24"},
                        {"none", 0, "", 0, "static:budget=24"}};
  for (const Case& k : cases) {
    CompressionSpec spec;
    spec.press = k.press;
    spec.ratio = k.ratio;
    spec.lowrank_file = k.lowrank;
    spec.rank = k.rank;
    spec.retrieval = k.retrieval;
    // A case that throws (a CPU-only path given device tensors) fails alone; the others still run.
    try {
      const auto want = decode_logits(*cpu, build_cache_setup(spec, *cpu), 96, 24);
      const auto got = decode_logits(*gpu, build_cache_setup(spec, *gpu), 96, 24);
      EXPECT_LT(max_difference(want, got), 1e-3) << spec.describe();
    } catch (const std::exception& e) {
      ADD_FAILURE() << spec.describe() << ": " << e.what();
    }
  }
}

TEST_F(CudaTest, GreedyGenerationMatchesCpu) {
  for (const std::string press : {"none", "snapkv", "streaming_llm"}) {
    std::vector<GenerationResult> results;
    for (const std::string device : {"cpu", "cuda"}) {
      auto model = load(device);
      CompressionSpec spec;
      spec.press = press;
      spec.ratio = press == "none" ? 0.0 : 0.5;
      const CacheSetup setup = build_cache_setup(spec, *model);
      KVCache cache = setup.new_cache(*model);
      auto observer = setup.new_observer();
      GenerationRequest request;
      for (int i = 0; i < 80; ++i) request.prompt.push_back(1 + (i * 53) % 400);
      request.max_new_tokens = 48;
      request.stop_at_eos = false;
      results.push_back(generate(*model, cache, request, {}, observer.get()));
    }
    EXPECT_EQ(results[0].tokens, results[1].tokens) << press;
    EXPECT_EQ(results[0].stats.kv_final.entries, results[1].stats.kv_final.entries) << press;
  }
}

// The gated store keeps a different rank per token: its CSR coefficients are padded on the GPU.
TEST_F(CudaTest, GatedLowRankStoreMatchesCpu) {
  at::manual_seed(11);
  auto cpu = load("cpu");
  const ModelConfig& c = cpu->config();
  const int64_t dkv = c.kv_dim(), KV = c.num_kv_heads, d = c.head_dim, T = 40;
  const AttentionShape shape{c.num_heads, KV, d, c.sliding_window};
  const at::Tensor U = std::get<0>(at::linalg_qr(at::randn({dkv, dkv}, at::kDouble))).to(at::kFloat);
  // A sharp gate: each token's rank is where its softmax peaks, far from the threshold.
  const at::Tensor W = at::randn({dkv, dkv}) * 40, b = at::zeros({dkv});
  const at::Tensor keys = at::randn({KV, T, d}), values = at::randn({KV, T, d});
  const at::Tensor queries = at::randn({c.num_heads, 1, d});
  std::vector<at::Tensor> outs, ranks, rebuilt;
  for (const std::string device : {"cpu", "cuda"}) {
    auto model = load(device);
    const at::Device dev = model->device();
    auto proj = std::make_shared<lowrank::RankedProjection>();
    proj->U = U.to(dev);
    proj->U_inv = U.t().contiguous().to(dev);
    proj->W = W.to(dev);
    proj->b = b.to(dev);
    proj->tau = 0.5;
    lowrank::LowRankLayerCache cache(shape, model->rope(), at::TensorOptions().dtype(at::kFloat).device(dev), proj,
                                     proj);
    const auto pos = [&](int64_t from, int64_t n) { return at::arange(from, from + n, at::kLong).to(dev); };
    cache.append(keys.narrow(1, 0, 32).to(dev), values.narrow(1, 0, 32).to(dev), pos(0, 32));
    for (int64_t t = 32; t < T; ++t)
      cache.append(keys.narrow(1, t, 1).to(dev), values.narrow(1, t, 1).to(dev), pos(t, 1));
    outs.push_back(cache.attend(queries.to(dev), pos(T, 1), {}, nullptr).cpu());
    cache.retain(at::arange(0, T, 2, at::kLong).unsqueeze(0).expand({KV, T / 2}).contiguous().to(dev));
    outs.push_back(cache.attend(queries.to(dev), pos(T, 1), {}, nullptr).cpu());
    ranks.push_back(cache.key_ranks());
    rebuilt.push_back(cache.reconstructed_keys().cpu());
  }
  ASSERT_TRUE(at::equal(ranks[0], ranks[1]));
  EXPECT_GT(std::get<0>(at::_unique(ranks[0])).numel(), 3) << "the gate should give several ranks";
  EXPECT_LT((rebuilt[0] - rebuilt[1]).abs().max().item<double>(), 1e-4);
  EXPECT_LT((outs[0] - outs[2]).abs().max().item<double>(), 1e-4);
  EXPECT_LT((outs[1] - outs[3]).abs().max().item<double>(), 1e-4);
}

#ifdef KVC_TORCH_CUDA
// Counts the host's waits for the GPU: PyTorch's sync debug mode warns at every synchronising call
// (.item(), copies to the host, nonzero, masked_select, ...), and this handler counts those warnings.
class SyncCounter : public c10::WarningHandler {
 public:
  SyncCounter() : guard_(this) { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN); }
  ~SyncCounter() override { c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED); }
  void process(const c10::Warning& w) override {
    if (w.msg().find("synchroniz") != std::string::npos) ++count;
  }
  int64_t count = 0;

 private:
  c10::WarningUtils::WarningHandlerGuard guard_;
};

// Waits inside model.forward over `steps` decode steps, after a prefill and two steps (which may grow
// buffers and compress).
int64_t decode_syncs(const LlamaModel& model, const CacheSetup& setup, int64_t steps) {
  std::vector<int> ids;
  for (int64_t i = 0; i < 96 + 2 + steps; ++i) ids.push_back(static_cast<int>(1 + (i * 37) % 500));
  KVCache cache = setup.new_cache(model);
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model.forward(std::vector<int>(ids.begin(), ids.begin() + 96), cache, o);
  for (int64_t i = 96; i < 98; ++i) model.forward({ids[i]}, cache, o);
  SyncCounter syncs;
  for (int64_t i = 98; i < 98 + steps; ++i) model.forward({ids[i]}, cache, o);
  return syncs.count;
}

// A decode step of a compressed cache waits for the GPU no more often than the uncompressed one (whose
// only wait is the step's token id copied to the GPU): no .item() or host index vector per step in the
// bounded presses, the low-rank caches (fixed rank, rotated keys, gated ranks) or attention.
TEST_F(CudaTest, CompressedDecodeStepsWaitForTheGpuNoMoreThanUncompressed) {
  {
    SyncCounter probe;
    (void)at::ones({1}, at::kCUDA).item<float>();
    ASSERT_GE(probe.count, 1) << "the sync debug mode does not report waits in this build";
  }
  auto gpu = load("cuda");
  const ModelConfig& c = gpu->config();
  const std::string dir = test::make_temp_dir("cuda_syncs");
  at::manual_seed(5);
  lowrank::Artifact bases, gates;
  bases.kind = lowrank::kBasesKind;
  gates.kind = lowrank::kGatesKind;
  gates.tau = 0.5;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor U = std::get<0>(at::linalg_qr(at::randn({c.kv_dim(), c.kv_dim()}, at::kDouble))).to(at::kFloat);
    const at::Tensor ev = at::ones({c.kv_dim()}, at::kDouble);
    bases.layers.push_back({{U, {}, {}, ev}, {U, {}, {}, ev}, {U, {}, {}, ev}});
    // A sharp random gate: ranks spread over the whole width.
    const at::Tensor W = at::randn({c.kv_dim(), c.kv_dim()}) * 40, b = at::zeros({c.kv_dim()});
    gates.layers.push_back({{U, W, b, {}}, {U, W, b, {}}});
  }
  lowrank::write_artifact(dir + "/bases.safetensors", bases, c);
  lowrank::write_artifact(dir + "/gates.safetensors", gates, c);
  const int64_t steps = 24;
  CompressionSpec none;
  const int64_t baseline = decode_syncs(*gpu, build_cache_setup(none, *gpu), steps);
  std::cout << "uncompressed: " << baseline << " waits in " << steps << " decode steps\n";
  struct Case {
    std::string press, lowrank;
    int64_t rank;
  };
  const Case cases[] = {{"snapkv", "", 0},
                        {"streaming_llm", "", 0},
                        {"h2o", "", 0},
                        {"tova", "", 0},
                        {"d2o", "", 0},
                        {"none", dir + "/bases.safetensors", c.kv_dim() / 2},
                        {"none", dir + "/bases.safetensors:keys=rotated", c.kv_dim() / 2},
                        {"none", dir + "/gates.safetensors", 0},
                        {"snapkv:heads=shared", dir + "/gates.safetensors", 0}};
  for (const Case& k : cases) {
    CompressionSpec spec;
    spec.press = k.press;
    spec.ratio = k.press == "none" ? 0.0 : 0.5;
    spec.lowrank_file = k.lowrank;
    spec.rank = k.rank;
    try {
      const int64_t waits = decode_syncs(*gpu, build_cache_setup(spec, *gpu), steps);
      std::cout << spec.describe() << ": " << waits << " waits\n";
      EXPECT_LE(waits, baseline) << spec.describe();
    } catch (const std::exception& e) {
      ADD_FAILURE() << spec.describe() << ": " << e.what();
    }
  }
  // Retrieval keeps the cache on the host and chooses clusters there: per layer and step, one copy
  // brings the queries down with the new keys, values and positions (the only wait); the chosen
  // entries go up from pinned memory without one.
  CompressionSpec retrieval;
  retrieval.retrieval = "adaptive:budget=24";
  const int64_t waits = decode_syncs(*gpu, build_cache_setup(retrieval, *gpu), steps);
  std::cout << retrieval.describe() << ": " << waits << " waits\n";
  EXPECT_LE(waits, baseline + steps * c.num_layers);
}
#endif

// Past the 16-entry budget after a few steps: the clusters grow and split while decoding.
TEST_F(CudaTest, RetrievalGenerationMatchesCpu) {
  const std::string tmp = test::make_temp_dir("cuda_retrieval");
  std::vector<std::string> outputs;
  for (const std::string device : {"cpu", "cuda"}) {
    const auto r =
        test::run_command(test::bin("kvc-generate") + " -m " + test::model_dir("stories260K") + " --device " + device +
                          " --prompt 'Once upon a time' -n 64 --ignore-eos --temperature 0 "
                          "--retrieval adaptive:budget=16 --retrieval-store " +
                          tmp + "/" + device + ".kvs");
    ASSERT_EQ(r.exit_code, 0) << device << ": " << r.err;
    outputs.push_back(r.out);
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

}  // namespace
}  // namespace kvc
