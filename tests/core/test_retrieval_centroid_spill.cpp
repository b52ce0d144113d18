// centroids=storage (DynaKV's Pipeline 1) moves where the centroids live, never what is attended: the
// same tokens through a cache with the centroids on storage and one with them in RAM give
// bit-identical logits, clusters and reads, while RAM holds the centroids of a few layers, not all.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "model/llama_model.h"
#include "retrieval/centroid_spill.h"
#include "retrieval/io_thread.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/retrieval_side.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

std::vector<float> ramp(int64_t n, float start) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

void write_layer(CentroidSpill& spill, int64_t layer, const std::vector<float>& floats) {
  float* out = spill.start_write(layer, static_cast<int64_t>(floats.size()));
  std::copy(floats.begin(), floats.end(), out);
  spill.finish_write();
}

std::vector<float> take_layer(CentroidSpill& spill, int64_t layer) {
  const SpilledCentroids read = spill.take(layer);
  std::vector<float> out(read.data(), read.data() + read.floats);
  spill.release(read);
  return out;
}

class SpillFile : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

// Layers written, grown past their region (moved), read back ahead or on demand: every read returns
// the layer's last write, and the file leaves no name behind in the store's folder.
TEST_P(SpillFile, ReadsBackEachLayersLastWrite) {
  const auto [async, direct] = GetParam();
  const std::string dir = test::make_temp_dir("kvc-spill");
  {
    std::unique_ptr<IoThread> io = async ? std::make_unique<IoThread>() : nullptr;
    CentroidSpill spill(dir + "/store.kvs", io.get(), direct);
    EXPECT_FALSE(spill.on_storage(0));
    write_layer(spill, 0, ramp(100, 0));
    write_layer(spill, 1, ramp(5000, 1e4f));
    spill.read_ahead(0);
    EXPECT_EQ(take_layer(spill, 0), ramp(100, 0));
    EXPECT_FALSE(spill.on_storage(0));
    write_layer(spill, 0, ramp(3000, 7));             // outgrows its two pages: moves to the end
    write_layer(spill, 1, ramp(4000, -5));            // fits where it was
    EXPECT_EQ(take_layer(spill, 1), ramp(4000, -5));  // on demand, behind the queued writes
    spill.read_ahead(0);
    EXPECT_EQ(take_layer(spill, 0), ramp(3000, 7));
    write_layer(spill, 2, {});
    EXPECT_TRUE(take_layer(spill, 2).empty());
    const CentroidSpillCounters c = spill.counters();
    EXPECT_EQ(c.writes, 5);
    EXPECT_EQ(c.reads, 4);
    EXPECT_EQ(c.read_ahead, 2);
    EXPECT_EQ(c.demand_reads, 2);
    EXPECT_EQ(c.read_bytes, 4 * (100 + 3000 + 4000));
    EXPECT_EQ(c.written_bytes, 4 * (100 + 5000 + 3000 + 4000));
    EXPECT_THROW(spill.take(1), Error);  // taken already: RAM has it
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir)) ADD_FAILURE() << "left behind: " << entry.path();
}

INSTANTIATE_TEST_SUITE_P(Modes, SpillFile, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(SpillFileErrors, AFolderThatCannotHoldTheFileIsNamed) {
  const std::string missing = test::make_temp_dir("kvc-spill") + "/no-such-folder";
  test::expect_error([&] { CentroidSpill spill(missing + "/store.kvs", nullptr, false); },
                     "cannot create a centroid file in '" + missing + "'");
}

// A write that fails (the file-size limit stands in for a full disk) is an error naming the folder: at
// once without an I/O thread, and with one at the next write, the failed write's future rethrowing.
TEST(SpillFileErrors, AFailedWriteIsAnErrorNamingTheFolder) {
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  rlimit small = before;
  small.rlim_cur = 64 << 10;
  // Ignored, SIGXFSZ would otherwise end the process; the write then fails with EFBIG.
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  for (const bool async : {false, true}) {
    const std::string dir = test::make_temp_dir("kvc-spill");
    std::unique_ptr<IoThread> io = async ? std::make_unique<IoThread>() : nullptr;
    CentroidSpill spill(dir + "/store.kvs", io.get(), false);
    write_layer(spill, 0, ramp(1000, 0));  // 4 KB: within the limit
    test::expect_error(
        [&] {
          write_layer(spill, 1, ramp(40000, 0));  // 160 KB past the limit
          if (async) {
            io->submit([] {}).wait();            // the failed write has run
            write_layer(spill, 0, ramp(10, 0));  // and is reported here
          }
        },
        "'" + dir + " (centroids)': write of");
  }
  ::setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
}

using Side = test::RetrievalSide;

RetrievalLayerCache& layer(Side& s, int64_t l) { return dynamic_cast<RetrievalLayerCache&>(s.cache->layer(l)); }

// Every (layer, head)'s clusters and centroids as one comparable text.
std::string index_state(Side& s) {
  std::ostringstream out;
  for (int64_t l = 0; l < s.cache->num_layers(); ++l) {
    layer(s, l).bring_centroids_back();
    for (const auto& h : layer(s, l).heads())
      for (size_t j = 0; j < h.clusters().size(); ++j) {
        out << l << ":" << h.clusters()[j].uid << ":" << h.clusters()[j].stats.n << "[";
        for (int64_t i = 0; i < 8; ++i) out << h.centroid(static_cast<int64_t>(j))[i] << " ";
        out << "] ";
      }
  }
  return out.str();
}

class CentroidsOnStorage : public ::testing::TestWithParam<std::string> {};

TEST_P(CentroidsOnStorage, ChangeRamNotOutputs) {
  const auto model = LlamaModel::load(test::model_dir("stories260K"));
  const std::vector<int> tokens = test::lcg_tokens(*model, 440, 777);
  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 400);
  Side ram = test::make_retrieval_side(*model, GetParam()),
       disk = test::make_retrieval_side(*model, GetParam() + ",centroids=storage");
  ForwardOptions last;
  last.all_logits = false;
  ASSERT_TRUE(at::equal(model->forward(prompt, *ram.cache, last), model->forward(prompt, *disk.cache, last)));
  for (size_t t = prompt.size(); t < tokens.size(); ++t) {
    const at::Tensor a = model->forward({tokens[t]}, *ram.cache, last),
                     b = model->forward({tokens[t]}, *disk.cache, last);
    ASSERT_TRUE(at::equal(a, b)) << "step " << t << ": max diff " << (a - b).abs().max().item<float>();
  }
  EXPECT_EQ(ram.shared->recall_sum, disk.shared->recall_sum);
  EXPECT_EQ(ram.shared->splits, disk.shared->splits);
  EXPECT_EQ(ram.shared->cache->counters().hits, disk.shared->cache->counters().hits);
  if (!ram.shared->prefetch)  // a read ahead is read again when its cluster changed meanwhile: timing
    EXPECT_EQ(ram.shared->store->counters().read_bytes, disk.shared->store->counters().read_bytes);

  // Between steps no layer keeps its centroids in RAM.
  for (int64_t l = 0; l < disk.cache->num_layers(); ++l)
    for (const auto& h : layer(disk, l).heads()) EXPECT_EQ(h.centroid_bytes(), 0) << "layer " << l;
  const CentroidSpillCounters c = disk.shared->centroid_spill->counters();
  const int64_t steps = static_cast<int64_t>(tokens.size() - prompt.size()), L = disk.cache->num_layers();
  EXPECT_EQ(c.reads, steps * L);
  EXPECT_EQ(c.demand_reads, 0) << "every layer's centroids were read ahead";
  EXPECT_EQ(c.writes, (steps + 1) * L);  // after the prompt and after every step

  // RAM held: the largest layer's tables with a quarter's growth room, one read ahead and one write in
  // flight (each rounded up to a page) — while RAM keeps all L layers' tables.
  EXPECT_EQ(index_state(ram), index_state(disk));
  int64_t largest = 0, all = 0;
  for (int64_t l = 0; l < L; ++l) {
    int64_t floats = 0;
    for (const auto& h : layer(disk, l).heads()) floats += h.centroid_table().spilled_floats();
    largest = std::max(largest, 4 * floats);
    all += 4 * floats;
  }
  EXPECT_GT(c.peak_held_bytes, largest * 4 / 5);
  EXPECT_LE(c.peak_held_bytes, largest * 5 / 4 + 2 * (largest + 4096)) << "of " << all << " in all";
  EXPECT_LT(c.peak_held_bytes, all);
}

// csize=2: many small clusters, so the centroids are a real share of the index.
INSTANTIATE_TEST_SUITE_P(Strategies, CentroidsOnStorage,
                         ::testing::Values("adaptive:csize=2,budget=64,cache_kb=8",
                                           "adaptive:csize=2,budget=64,cache_kb=8,prefetch=1,tau_scale=0,bmax=4",
                                           "static:csize=2,budget=64,cache_kb=8,async=0",
                                           "local:csize=2,budget=64,cache_kb=8,every=8"));

TEST(CentroidsOnStorage, OnlyForClusteredStrategies) {
  EXPECT_THROW(RetrievalConfig::parse("pq:centroids=storage"), Error);
  EXPECT_THROW(RetrievalConfig::parse("none:centroids=storage"), Error);
  EXPECT_THROW(RetrievalConfig::parse("adaptive:centroids=flash"), Error);
  EXPECT_TRUE(RetrievalConfig::parse("local:centroids=storage").centroids_on_storage);
  EXPECT_FALSE(RetrievalConfig::parse("local").centroids_on_storage);
}

}  // namespace
}  // namespace kvc::retrieval
