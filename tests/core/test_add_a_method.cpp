// The "add a method" example of docs/architecture.md, compiled as the docs print it
// (examples/add_a_method/front_loaded.cpp) and registered as lib/press/builtin_presses.cpp would:
// it builds, the registry finds it, and it keeps what its description promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include "compression/compression_spec.h"
#include "model/llama_model.h"
#include "press/press_registry.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {
void register_front_loaded();  // examples/add_a_method/front_loaded.cpp
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first C++ block after the "## Add a method" heading.
std::string documented_example() {
  const std::string doc = read(std::string(KVC_SOURCE_DIR) + "/docs/architecture.md");
  const size_t section = doc.find("\n## Add a method\n");
  if (section == std::string::npos) return "";
  const size_t open = doc.find("```cpp\n", section);
  if (open == std::string::npos) return "";
  const size_t begin = open + 7, close = doc.find("```\n", begin);
  return doc.substr(begin, close - begin);
}

const LlamaModel& model() {
  static auto m = LlamaModel::load(test::model_dir("stories260K"));
  return *m;
}

std::vector<int> prompt(int64_t n) {
  const Tokenizer tok = Tokenizer::load(test::model_dir("stories260K") + "/tokenizer.model");
  const auto ids =
      tok.encode_prompt(test::slurp(test::data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 6000));
  return std::vector<int>(ids.begin(), ids.begin() + n);
}

CacheSetup setup_for(const std::string& press, double ratio, int64_t budget = 0) {
  static const bool registered = [] {
    press_names();  // the built-in methods first, as in the tools
    register_front_loaded();
    return true;
  }();
  (void)registered;
  CompressionSpec spec;
  spec.press = press;
  spec.ratio = ratio;
  spec.budget = budget;
  return build_cache_setup(spec, model());
}

KVCache prefill(const CacheSetup& setup, const std::vector<int>& ids) {
  KVCache cache = setup.new_cache(model());
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model().forward(ids, cache, o);
  return cache;
}

TEST(AddAMethod, TheDocsPrintTheCompiledFile) {
  const std::string file = read(std::string(KVC_SOURCE_DIR) + "/examples/add_a_method/front_loaded.cpp");
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(documented_example(), file)
      << "docs/architecture.md's example and examples/add_a_method/front_loaded.cpp differ";
}

TEST(AddAMethod, TheRegistryListsItAndChecksItsParameters) {
  setup_for("front_loaded", 0.5);
  const auto names = press_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "front_loaded"), names.end());
  EXPECT_NO_THROW(setup_for("front_loaded:window=16", 0.5));
  EXPECT_THROW(setup_for("front_loaded:kernal=3", 0.5), Error);
}

// The first half of the layers keeps three times the second half's entries, the total is the
// uniform budget's, and each layer keeps the entries SnapKV keeps at that layer's size.
TEST(AddAMethod, TheFirstHalfKeepsThreeTimesTheSecondOnSnapKVScores) {
  const auto& c = model().config();
  const int64_t n = 160, L = c.num_layers;
  const std::vector<int> ids = prompt(n);
  const KVCache cache = prefill(setup_for("front_loaded:window=16", 0.5), ids);
  const int64_t total = (n / 2) * L;
  double weight_sum = 0;
  for (int64_t l = 0; l < L; ++l) weight_sum += l < L / 2 ? 3.0 : 1.0;
  int64_t kept = 0;
  for (int64_t l = 0; l < L; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const int64_t length = cache.layer(l).lengths()[0].item<int64_t>();
    kept += length;
    // Every layer keeps at least one entry (distribute's floor); the rest is split 3:1.
    const double share = 1 + static_cast<double>(total - L) * (l < L / 2 ? 3.0 : 1.0) / weight_sum;
    EXPECT_LE(std::abs(static_cast<double>(length) - share), 1.0);
    // Prefill attention does not depend on what earlier layers dropped, so SnapKV held to this
    // layer's size keeps the same positions here.
    const KVCache snapkv = prefill(setup_for("snapkv:window=16", 0.0, length), ids);
    const auto mine = test::head_positions(cache.layer(l)), theirs = test::head_positions(snapkv.layer(l));
    ASSERT_EQ(mine.size(), theirs.size());
    for (size_t h = 0; h < mine.size(); ++h) EXPECT_TRUE(mine[h].equal(theirs[h])) << "head " << h;
  }
  EXPECT_EQ(kept, total);
}

}  // namespace
}  // namespace kvc
