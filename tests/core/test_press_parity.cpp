// Kept-entry parity with kvpress: the golden files under data/parity/ hold, per model, method and
// ratio, the prompt's token ids and the positions kvpress kept per layer × KV head (for a press that evicts
// while decoding, also the greedy tokens kvpress fed after the prompt, and what each head held after them)
// (scripts/kvpress_parity.py wrote them). kvc, run with the parameters that reproduce kvpress (in each
// file's metadata), must keep exactly the same positions where the file says parity=exact, and at
// least the recorded mean Jaccard elsewhere (a method kvc cannot reproduce exactly; the reason is in
// the file's metadata). Gemma 3 270M's files (the GGUF scripts/setup.sh installs; skipped when absent)
// hold its global layers only, the ones kvc compresses.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "compression/compression_spec.h"
#include "harness/shared_prefill.h"
#include "io/safetensors.h"
#include "model/llama_model.h"
#include "model/tensor_bridge.h"
#include "press/channel_pruned_cache.h"
#include "press/press_registry.h"
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

// One golden file, its setup and what it asks to compare.
struct Golden {
  std::filesystem::path path;
  std::shared_ptr<st::SafetensorsFile> file;
  std::vector<int> ids;
  std::vector<int> continuation;  // tokens fed one pass each after the prompt (a press that evicts while decoding)
  CacheSetup setup;
};

// Checks the cache a golden file's press left against the positions kvpress kept. Returns whether the file
// asks for exact parity.
// Value rows compared (files of methods that rewrite values), over every file checked.
int values_checked = 0;

bool check_golden(const Golden& g, const KVCache& cache) {
  SCOPED_TRACE(g.path.string());
  const auto& meta = g.file->metadata();
  const bool must_match = meta.at("parity") == "exact";
  double sum = 0;
  int count = 0;
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    if (!g.file->contains("kept." + std::to_string(l) + ".0")) continue;  // a layer the file leaves out
    // A file of kept key channels (ThinK) is compared with the channels the layer stores.
    const bool channels = meta.count("selects") != 0 && meta.at("selects") == "channels";
    const auto* pruned = dynamic_cast<const ChannelPrunedLayerCache*>(&cache.layer(l));
    if (channels) EXPECT_NE(pruned, nullptr) << "layer " << l << " stores every key channel";
    std::vector<at::Tensor> heads;
    if (channels && pruned != nullptr) {
      for (int64_t h = 0; h < pruned->channels().size(0); ++h) heads.push_back(pruned->channels()[h]);
    } else if (!channels) {
      heads = head_positions(cache.layer(l));
    }
    for (size_t h = 0; h < heads.size(); ++h) {
      const auto golden = as_set(load_tensor(g.file, "kept." + std::to_string(l) + "." + std::to_string(h)));
      const auto ours = as_set(heads[h]);
      if (must_match) EXPECT_EQ(ours, golden) << "layer " << l << " head " << h;
      sum += jaccard(ours, golden);
      ++count;
      // A method that rewrites kept values (merging): kvpress' values of the kept entries, by position.
      const std::string values_name = "values." + std::to_string(l) + "." + std::to_string(h);
      if (g.file->contains(values_name) && ours == golden) {
        const at::Tensor expected = load_tensor(g.file, values_name).to(at::kFloat);
        const auto* dense = dynamic_cast<const DenseLayerCache*>(&cache.layer(l));
        EXPECT_NE(dense, nullptr) << "layer " << l << " is not the dense cache a merging press needs";
        if (dense == nullptr) continue;
        const at::Tensor got = dense->values()[static_cast<int64_t>(h)].to(at::kFloat);
        const double scale = expected.abs().max().item<double>();
        EXPECT_TRUE(at::allclose(got, expected, 0, 1e-4 * std::max(scale, 1.0)))
            << "layer " << l << " head " << h << ": largest value difference "
            << (got - expected).abs().max().item<double>();
        ++values_checked;
      }
    }
  }
  EXPECT_GT(count, 0);
  if (!must_match && count > 0) EXPECT_GE(sum / count, std::stod(meta.at("kvc_jaccard")) - 1e-3) << meta.at("reason");
  return must_match;
}

TEST(CompressionParityWithKvpress, KeptPositionsMatchTheGoldenFiles) {
  const auto files = golden_files();
  ASSERT_FALSE(files.empty()) << "no golden files under data/parity (scripts/kvpress_parity.py writes them)";
  int exact = 0;
  std::set<std::string> absent;
  // The files of one model share its prompt: one prefill serves every press that can take a shared one
  // (harness/shared_prefill.h; each sees what its own prefill would show it), the others run alone.
  std::map<std::string, std::vector<Golden>> by_model;
  for (const auto& path : files) {
    const std::string model_name = path.parent_path().filename().string();
    if (!std::filesystem::exists(model_path(model_name))) {
      absent.insert(model_name);
      continue;
    }
    Golden g;
    g.path = path;
    g.file = st::SafetensorsFile::open(path.string());
    const auto& meta = g.file->metadata();
    const at::Tensor ids_tensor = load_tensor(g.file, "prompt").to(at::kLong).contiguous();
    g.ids.assign(ids_tensor.data_ptr<int64_t>(), ids_tensor.data_ptr<int64_t>() + ids_tensor.numel());
    if (g.file->contains("continuation")) {
      const at::Tensor fed = load_tensor(g.file, "continuation").to(at::kLong).contiguous();
      g.continuation.assign(fed.data_ptr<int64_t>(), fed.data_ptr<int64_t>() + fed.numel());
    }
    CompressionSpec spec;
    // A file a press reads (LU-KV's curve) is named from the repository's root.
    spec.press = meta.at("kvc_press");
    if (const size_t at = spec.press.find("=data/"); at != std::string::npos)
      spec.press.replace(at + 1, 5, test::repo_data_dir() + "/");
    std::istringstream flag(meta.at("kvc_budget"));
    std::string name, value;
    flag >> name >> value;
    if (name == "--budget") spec.budget = std::stoll(value);
    else if (name == "--ratio") spec.ratio = std::stod(value);  // none: a press that sizes itself
    g.setup = build_cache_setup(spec, model(model_name));
    by_model[model_name].push_back(std::move(g));
  }
  for (auto& [model_name, goldens] : by_model) {
    const LlamaModel& m = model(model_name);
    std::vector<const CacheSetup*> setups;
    std::vector<size_t> shared;
    for (size_t i = 0; i < goldens.size(); ++i) {
      setups.push_back(&goldens[i].setup);
      if (goldens[i].ids == goldens[0].ids && goldens[i].continuation.empty() && shares_prefill(goldens[i].setup, m)) {
        shared.push_back(i);
      } else {
        KVCache cache = goldens[i].setup.new_cache(m);
        auto observer = goldens[i].setup.new_observer();
        ForwardOptions o;
        o.all_logits = false;
        o.observer = observer.get();
        m.forward(goldens[i].ids, cache, o);
        // kvpress' greedy tokens, fed as it fed them; the file holds what each head held after the last.
        for (int token : goldens[i].continuation) m.forward({token}, cache, o);
        exact += check_golden(goldens[i], cache);
      }
    }
    for (const auto& group : prefill_groups(setups, shared, m, goldens[0].ids)) {
      std::vector<const CacheSetup*> members;
      for (size_t i : group) members.push_back(setups[i]);
      SharedPrefill prefill(m, members, goldens[group[0]].ids);
      for (size_t j = 0; j < group.size(); ++j) exact += check_golden(goldens[group[j]], prefill.replay(j).cache);
    }
  }
  EXPECT_GT(exact, 0);
  EXPECT_GT(values_checked, 0) << "no golden file of a merging press was compared";
  for (const auto& name : absent)
    std::printf("skipped %s: %s is absent (scripts/setup.sh installs it)\n", name.c_str(), model_path(name).c_str());
}

// Every method compared with kvpress keeps its golden files: stories260K's, the model every checkout has, at
// each ratio scripts/kvpress_parity.py compares it at.
TEST(CompressionParityWithKvpress, EveryComparedMethodHasGoldenFiles) {
  std::map<std::string, std::set<std::string>> ratios;
  for (const auto& path : golden_files()) {
    if (path.parent_path().filename() != "stories260K") continue;
    auto file = st::SafetensorsFile::open(path.string());
    ratios[file->metadata().at("method")].insert(file->metadata().at("ratio"));
  }
  const std::set<std::string> all{"0.25", "0.5", "0.75", "0.9"};
  for (const char* method : {"streaming_llm",
                             "snapkv",
                             "tova",
                             "knorm",
                             "observed_attention",
                             "pyramidkv",
                             "pyramidkv_beta2",
                             "kvcompose",
                             "ada_snapkv",
                             "keydiff",
                             "expected_attention",
                             "lagkv_cross",
                             "leverage",
                             "non_causal_attention",
                             "cur",
                             "compactor",
                             "criticalkv_snapkv",
                             "criticalkv_ada_snapkv",
                             "cap",
                             "chunk_keydiff",
                             "block_keydiff",
                             "kvzip",
                             "kvzip_layerwise",
                             "simlayerkv",
                             "think",
                             "chunkkv_snapkv",
                             "dms_keydiff",
                             "finch",
                             "merging_knorm",
                             "merging_snapkv_gated",
                             "lukv_keydiff",
                             "dms_keydiff_decoding",
                             "decoding_keydiff",
                             "decoding_fraction_keydiff",
                             "decoding_snapkv",
                             "prefill_decoding_keydiff"}) {
    EXPECT_EQ(ratios[method], all) << method;
  }
  // LagKV's rank scores tie across partitions: kvpress' choice among ties at 0.9 is arbitrary (the script).
  EXPECT_EQ(ratios["lagkv"], (std::set<std::string>{"0.25", "0.5", "0.75"}));
  // kvpress' chunked FINCH asserts chunk > window / (1 - ratio), which 0.9 breaks at chunks of 100.
  EXPECT_EQ(ratios["finch_chunked"], (std::set<std::string>{"0.25", "0.5", "0.75"}));
}

}  // namespace
}  // namespace kvc
