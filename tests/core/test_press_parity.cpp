// Kept-entry parity with kvpress: the golden files under data/parity/ hold, per model, method and
// ratio, the prompt's token ids and the positions kvpress kept per layer × KV head
// (scripts/kvpress_parity.py wrote them). kvc, run with the parameters that reproduce kvpress (in each
// file's metadata), must keep exactly the same positions where the file says parity=exact, and at
// least the recorded mean Jaccard elsewhere (a method kvc cannot reproduce exactly; the reason is in
// the file's metadata). Gemma 3 270M's files (the GGUF scripts/setup.sh installs; skipped when absent)
// hold its global layers only, the ones kvc compresses.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "compression/compression_spec.h"
#include "press/press_registry.h"
#include "io/safetensors.h"
#include "model/llama_model.h"
#include "model/tensor_bridge.h"
#include "support/head_positions.h"
#include "support/paths.h"

namespace kvc {
namespace {

// The models the golden files name: the test models in data/models, and the GGUF models setup installs.
std::string model_path(const std::string& name) {
  if (name == "gemma3-270m") return test::gemma3_gguf();
  return test::model_dir_or_shared(name);
}

const LlamaModel& model(const std::string& name) {
  static std::map<std::string, std::shared_ptr<LlamaModel>> loaded;
  auto& m = loaded[name];
  // The golden files come from kvpress on transformers' float32 weights: a GGUF is dequantized as they were.
  if (!m) {
    LoadOptions options;
    if (name == "gemma3-270m") options.dtype = "float32";
    m = LlamaModel::load(model_path(name), options);
  }
  return *m;
}

using test::head_positions;

std::set<int64_t> as_set(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::set<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

double jaccard(const std::set<int64_t>& a, const std::set<int64_t>& b) {
  size_t common = 0;
  for (int64_t x : a) common += b.count(x);
  const size_t all = a.size() + b.size() - common;
  return all == 0 ? 1.0 : static_cast<double>(common) / static_cast<double>(all);
}

std::vector<std::filesystem::path> golden_files() {
  std::vector<std::filesystem::path> out;
  const std::filesystem::path root = test::repo_data_dir() + "/parity";
  if (!std::filesystem::exists(root)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().extension() == ".safetensors") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CompressionParityWithKvpress, KeptPositionsMatchTheGoldenFiles) {
  const auto files = golden_files();
  ASSERT_FALSE(files.empty()) << "no golden files under data/parity (scripts/kvpress_parity.py writes them)";
  int exact = 0;
  std::set<std::string> absent;
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    auto file = st::SafetensorsFile::open(path.string());
    const auto& meta = file->metadata();
    const std::string model_name = path.parent_path().filename().string();
    if (!std::filesystem::exists(model_path(model_name))) {
      absent.insert(model_name);
      continue;
    }
    const LlamaModel& m = model(model_name);
    const at::Tensor ids_tensor = load_tensor(file, "prompt").to(at::kLong).contiguous();
    const std::vector<int> ids(ids_tensor.data_ptr<int64_t>(), ids_tensor.data_ptr<int64_t>() + ids_tensor.numel());
    CompressionSpec spec;
    spec.press = meta.at("kvc_press");
    std::istringstream flag(meta.at("kvc_budget"));
    std::string name, value;
    flag >> name >> value;
    if (name == "--budget") spec.budget = std::stoll(value);
    else spec.ratio = std::stod(value);
    const CacheSetup setup = build_cache_setup(spec, m);
    KVCache cache = setup.new_cache(m);
    auto observer = setup.new_observer();
    ForwardOptions o;
    o.all_logits = false;
    o.observer = observer.get();
    m.forward(ids, cache, o);
    const bool must_match = meta.at("parity") == "exact";
    exact += must_match;
    double sum = 0;
    int count = 0;
    for (int64_t l = 0; l < cache.num_layers(); ++l) {
      if (!file->contains("kept." + std::to_string(l) + ".0")) continue;  // a layer the file leaves out
      const auto heads = head_positions(cache.layer(l));
      for (size_t h = 0; h < heads.size(); ++h) {
        const auto golden = as_set(load_tensor(file, "kept." + std::to_string(l) + "." + std::to_string(h)));
        const auto ours = as_set(heads[h]);
        if (must_match) EXPECT_EQ(ours, golden) << "layer " << l << " head " << h;
        sum += jaccard(ours, golden);
        ++count;
      }
    }
    ASSERT_GT(count, 0);
    if (!must_match) EXPECT_GE(sum / count, std::stod(meta.at("kvc_jaccard")) - 1e-3) << meta.at("reason");
  }
  EXPECT_GT(exact, 0);
  for (const auto& name : absent) std::printf("skipped %s: %s is absent (scripts/setup.sh installs it)\n", name.c_str(),
                                               model_path(name).c_str());
}

}  // namespace
}  // namespace kvc
