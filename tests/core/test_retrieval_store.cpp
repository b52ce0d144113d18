// The store half of clustered retrieval: k-means, incremental cluster statistics, the page
// store (layouts, read coalescing, crash safety) and the RAM cluster cache, each against a brute-force
// or hand-computed expectation.
#include <gtest/gtest.h>

#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "retrieval/cluster_cache.h"
#include "retrieval/cluster_stats.h"
#include "retrieval/index_reader.h"
#include "retrieval/kmeans.h"
#include "retrieval/page_store.h"
#include "retrieval/retrieval_config.h"
#include "support/run_command.h"
#include "util/error.h"
#include "util/interrupt.h"

namespace kvc::retrieval {
namespace {

std::vector<float> random_points(int64_t n, int64_t d, uint64_t seed, float spread = 1.0f) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (auto& v : x) v = normal(rng);
  return x;
}

EntryBlock random_block(int64_t n, int64_t d, int64_t first_pos, uint64_t seed) {
  EntryBlock b(d);
  const auto k = random_points(n, d, seed), v = random_points(n, d, seed + 1);
  for (int64_t i = 0; i < n; ++i) b.push(k.data() + i * d, v.data() + i * d, first_pos + i);
  return b;
}

TEST(ClusterStats, IncrementalMatchesTwoPass) {
  const int64_t n = 200, d = 5;
  const auto x = random_points(n, d, 1, 3.0f);
  ClusterStats inc;
  std::vector<float> mean(d, 0.0f), ref_mean(d);
  for (int64_t i = 0; i < n; ++i) {
    const double predicted = inc.variance_with(mean.data(), x.data() + i * d, d);
    inc.add(mean.data(), x.data() + i * d, d);
    EXPECT_NEAR(predicted, inc.variance(), 1e-12);
    const ClusterStats ref = ClusterStats::of(x.data(), i + 1, d, ref_mean.data());
    // The centroid is stored as float: the incremental one drifts from the two-pass one by rounding only.
    ASSERT_NEAR(inc.variance(), ref.variance(), 1e-6 * (1 + ref.variance()));
    for (int64_t t = 0; t < d; ++t) ASSERT_NEAR(mean[t], ref_mean[t], 1e-5);
  }
}

TEST(KMeans, RecoversSeparatedBlobs) {
  const int64_t d = 4, per = 30;
  std::vector<float> x;
  for (int c = 0; c < 3; ++c) {
    const auto blob = random_points(per, d, 10 + c, 0.1f);
    for (int64_t i = 0; i < per * d; ++i) x.push_back(blob[i] + (i % d == 0 ? 10.0f * c : 0.0f));
  }
  const KMeansResult r = kmeans(x.data(), 3 * per, d, 3);
  ASSERT_EQ(r.k, 3);
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < per; ++i) EXPECT_EQ(r.assign[c * per + i], r.assign[c * per]) << "blob " << c;
  EXPECT_EQ(std::set<int32_t>(r.assign.begin(), r.assign.end()).size(), 3u);
}

TEST(KMeans, DirectionsGroupPointsByAngleWhateverTheirNorms) {
  // Two directions (x and y axes, a little noise), each at norms 1 and 20. By direction the two clusters
  // are the two axes; by squared distance the near points of both axes (1.4 apart, 20 from the far ones)
  // share a cluster.
  const int64_t per = 20, d = 2;
  const auto noise = random_points(4 * per, d, 3, 0.02f);
  std::vector<float> x;
  for (int64_t i = 0; i < 4 * per; ++i) {
    const bool y_axis = (i / per) % 2 == 1;
    const float norm = i / (2 * per) == 0 ? 1.0f : 20.0f;
    x.push_back((y_axis ? 0.0f : norm) + noise[i * d]);
    x.push_back((y_axis ? norm : 0.0f) + noise[i * d + 1]);
  }
  KMeansOptions by_direction;
  by_direction.directions = true;
  const KMeansResult angle = kmeans(x.data(), 4 * per, d, 2, by_direction);
  const KMeansResult distance = kmeans(x.data(), 4 * per, d, 2);
  for (int64_t i = 0; i < 4 * per; ++i) {
    const bool y_axis = (i / per) % 2 == 1;
    EXPECT_EQ(angle.assign[i] == angle.assign[per], y_axis) << "point " << i;  // point `per` is on the y axis
  }
  for (int64_t i = 0; i < 2 * per; ++i) EXPECT_EQ(distance.assign[i], distance.assign[0]) << "point " << i;
}

TEST(KMeans, NoEmptyClustersWithDuplicatePoints) {
  // 12 points, only 3 distinct: asking for 6 clusters must still give 6 non-empty ones.
  std::vector<float> x;
  for (int i = 0; i < 12; ++i) x.push_back(static_cast<float>(i % 3));
  const KMeansResult r = kmeans(x.data(), 12, 1, 6);
  std::vector<int> counts(6, 0);
  for (int32_t a : r.assign) counts[a] += 1;
  for (int c = 0; c < 6; ++c) EXPECT_GT(counts[c], 0) << "cluster " << c;
  EXPECT_EQ(kmeans(x.data(), 12, 1, 50).k, 12);  // k clamps to n
}

TEST(KMeans, EachPointEndsAtItsNearestCentroid) {
  // Converged Lloyd: the assignment (found by one matrix product per iteration) is each point's nearest
  // centroid by a brute-force double-precision search, and each centroid is its members' mean.
  const int64_t n = 1500, d = 16, k = 90;
  const auto x = random_points(n, d, 5, 2.0f);
  KMeansOptions opt;
  opt.iterations = 300;
  const KMeansResult r = kmeans(x.data(), n, d, k, opt);
  ASSERT_LT(r.iterations, opt.iterations) << "did not converge";
  const auto sq = [&](int64_t i, int64_t j) {
    double s = 0;
    for (int64_t t = 0; t < d; ++t) s += std::pow(double(x[i * d + t]) - r.centroids[j * d + t], 2);
    return s;
  };
  for (int64_t i = 0; i < n; ++i) {
    double best = sq(i, 0);
    for (int64_t j = 1; j < k; ++j) best = std::min(best, sq(i, j));
    ASSERT_LE(sq(i, r.assign[i]), best + 1e-4 * (1 + best)) << "point " << i;
  }
  for (int64_t j = 0; j < k; ++j) {
    std::vector<double> mean(d, 0.0);
    int64_t members = 0;
    for (int64_t i = 0; i < n; ++i)
      if (r.assign[i] == j) {
        members += 1;
        for (int64_t t = 0; t < d; ++t) mean[t] += x[i * d + t];
      }
    ASSERT_GT(members, 0);
    for (int64_t t = 0; t < d; ++t) ASSERT_NEAR(mean[t] / members, r.centroids[j * d + t], 1e-5) << "cluster " << j;
  }
}

TEST(KMeans, CtrlCStopsBetweenIterations) {
  // In a child (the interrupt flag cannot be cleared): after one SIGINT, k-means throws InterruptedError
  // at its next iteration instead of clustering on; a loop without the check would exit 0.
  const auto x = random_points(2000, 16, 7, 2.0f);
  EXPECT_EXIT(
      {
        kvc::install_interrupt_handler();
        std::raise(SIGINT);
        try {
          kmeans(x.data(), 2000, 16, 50);
        } catch (const kvc::InterruptedError&) {
          std::_Exit(130);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(130), "interrupted");
}

TEST(KMeans, SegmentsAreClusteredApart) {
  // 1000 points in segments of at most 300: four balanced segments of 250, each with 250 / 10 = 25
  // clusters of its own points only, numbered after the previous segment's.
  const int64_t n = 1000, d = 3;
  const auto x = random_points(n, d, 6);
  const KMeansResult r = kmeans_in_segments(x.data(), n, d, 10, 300);
  ASSERT_EQ(r.k, 100);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t segment = i / 250;
    ASSERT_GE(r.assign[i], segment * 25) << "point " << i;
    ASSERT_LT(r.assign[i], (segment + 1) * 25) << "point " << i;
  }
  // Without segments (or one long enough) it is plain k-means.
  const KMeansResult whole = kmeans_in_segments(x.data(), n, d, 10, 0), plain = kmeans(x.data(), n, d, 100);
  EXPECT_EQ(whole.assign, plain.assign);
  EXPECT_EQ(kmeans_in_segments(x.data(), n, d, 10, 1000).assign, plain.assign);
}

std::string temp_file(const std::string& name) { return test::make_temp_dir("kvc-store") + "/" + name; }

void expect_same(const EntryBlock& a, const EntryBlock& b) {
  ASSERT_EQ(a.size(), b.size());
  std::map<int64_t, int64_t> where;
  for (int64_t i = 0; i < b.size(); ++i) where[b.positions[i]] = i;
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(where.count(a.positions[i])) << "position " << a.positions[i];
    const int64_t j = where[a.positions[i]];
    for (int64_t t = 0; t < a.dim; ++t) {
      ASSERT_EQ(a.key(i)[t], b.key(j)[t]);
      ASSERT_EQ(a.value(i)[t], b.value(j)[t]);
    }
  }
}

class StoreLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(StoreLayouts, ReadsBackEverythingWritten) {
  for (const TailPlacement tails : {TailPlacement::kStorage, TailPlacement::kRam, TailPlacement::kSmallInRam}) {
    SCOPED_TRACE(tails == TailPlacement::kStorage ? "unfilled last pages on storage"
                 : tails == TailPlacement::kRam   ? "unfilled last pages in RAM"
                                                  : "clusters of one or two entries in RAM");
    const int64_t d = 8;
    PageStore store(temp_file("s.kvs"), d, GetParam());
    store.set_tail_placement(tails);
    const int64_t pp = store.per_page();  // 56 records of 72 bytes
    std::vector<EntryBlock> truth;
    std::vector<int64_t> uids;
    for (int c = 0; c < 5; ++c) {
      truth.push_back(random_block(10 + 40 * c, d, 1000 * c, c));
      uids.push_back(store.create(truth.back(), c % 2 == 1 ? uids.back() : -1));
    }
    // Appends cross page boundaries; the cluster grows past its initial room.
    std::mt19937 rng(3);
    for (int i = 0; i < 3 * static_cast<int>(pp); ++i) {
      const int c = static_cast<int>(rng() % 5);
      const EntryBlock one = random_block(1, d, 100000 + i, 100 + i);
      truth[c].append(one);
      store.append(uids[c], one.key(0), one.value(0), one.positions[0]);
    }
    const auto got = store.read(uids);
    for (int c = 0; c < 5; ++c) {
      SCOPED_TRACE(c);
      expect_same(got[c], truth[c]);
      EXPECT_EQ(store.entries(uids[c]), truth[c].size());
    }
    // Rewrite (a split's staying child) keeps only the given records.
    EntryBlock half(d);
    for (int64_t i = 0; i < truth[4].size() / 2; ++i) half.push_from(truth[4], i);
    store.rewrite(uids[4], half);
    expect_same(store.read({uids[4]}).front(), half);
    EXPECT_EQ(store.counters().written_bytes % PageStore::kPageBytes, 0) << "writes are whole pages";
    int64_t unfilled = 0;
    for (int c = 0; c < 5; ++c) unfilled += store.entries(uids[c]) % pp;
    EXPECT_LE(store.tail_bytes(), unfilled * RecordFormat{d}.record_bytes());
    if (tails == TailPlacement::kRam) EXPECT_EQ(store.tail_bytes(), unfilled * RecordFormat{d}.record_bytes());
  }
}

INSTANTIATE_TEST_SUITE_P(All, StoreLayouts, ::testing::Values(Layout::kDualHead, Layout::kNaive));

TEST(PageStore, DualHeadPoolsAbsorbGrowthNaiveMovesData) {
  const int64_t d = 8;
  int64_t moved[2];
  for (int l = 0; l < 2; ++l) {
    PageStore store(temp_file("g.kvs"), d, l == 0 ? Layout::kDualHead : Layout::kNaive);
    store.set_pool_pages(8);
    const int64_t pp = store.per_page();
    const int64_t a = store.create(random_block(pp, d, 0, 1));
    const int64_t b = store.create(random_block(pp, d, 1000, 2), a);
    // Two more pages each: 3 + 3 pages fit in the 8-page pool, so dual-head moves nothing.
    for (int64_t i = 0; i < 2 * pp; ++i) {
      const EntryBlock one = random_block(1, d, 5000 + i, 7 + i);
      store.append(a, one.key(0), one.value(0), one.positions[0]);
      store.append(b, one.key(0), one.value(0), one.positions[0] + 100000);
    }
    moved[l] = store.counters().moved_bytes;
    EXPECT_EQ(store.entries(a), 3 * pp);
  }
  EXPECT_EQ(moved[0], 0);
  // Naive: each cluster moved at its 2nd and 3rd page: (1 + 2) pages each.
  EXPECT_EQ(moved[1], 2 * 3 * PageStore::kPageBytes);
}

// A cluster written whole leaves no RAM behind: its unfilled last page goes to storage. The first
// append reads that page back into the write buffer (one page read for updates); the buffer then holds
// only what it gathers until the page fills and goes out, and commit writes it out too.
TEST(PageStore, WriteBuffersHoldOnlyEntriesAddedSinceAClusterWasWritten) {
  const int64_t d = 8;
  const std::string path = temp_file("w.kvs");
  PageStore store(path, d, Layout::kDualHead);
  const int64_t pp = store.per_page(), in_ram = RecordFormat{d}.record_bytes();
  EntryBlock truth = random_block(pp + 10, d, 0, 1);
  const int64_t a = store.create(truth);
  const int64_t b = store.create(random_block(3, d, 500, 2), a);
  EXPECT_EQ(store.tail_bytes(), 0);
  EXPECT_EQ(store.entries(a), pp + 10);
  expect_same(store.read({a}).front(), truth);

  const auto append = [&](int64_t i) {
    const EntryBlock one = random_block(1, d, 1000 + i, 10 + i);
    truth.append(one);
    store.append(a, one.key(0), one.value(0), one.positions[0]);
  };
  append(0);
  EXPECT_EQ(store.counters().update_read_bytes, PageStore::kPageBytes) << "the partial page is read back once";
  EXPECT_EQ(store.tail_bytes(), 11 * in_ram);
  append(1);
  EXPECT_EQ(store.counters().update_read_bytes, PageStore::kPageBytes);
  EXPECT_EQ(store.tail_bytes(), 12 * in_ram);
  expect_same(store.read({a}).front(), truth);
  for (int64_t i = 2; i < pp - 10; ++i) append(i);  // the second page fills and goes out
  EXPECT_EQ(store.entries(a), 2 * pp);
  EXPECT_EQ(store.tail_bytes(), 0);
  append(pp);
  EXPECT_EQ(store.tail_bytes(), in_ram);
  const StoreManifest m = store.commit();
  EXPECT_EQ(store.tail_bytes(), 0) << "commit leaves no write buffer in RAM";
  EXPECT_NO_THROW(PageStore::verify(path, m));
  expect_same(store.read({a}).front(), truth);
  EXPECT_EQ(store.entries(b), 3);

  // A damaged partial page is refused when an append reads it back, not taken into the buffer.
  const int64_t c = store.create(random_block(5, d, 2000, 3));
  store.commit();
  const int64_t page = m.file_pages;  // c's pool starts where the committed file ended
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(page * PageStore::kPageBytes + PageStore::kHeaderBytes + 3);
    f.put('\x5a');
  }
  std::vector<float> x(static_cast<size_t>(d), 1.0f);
  try {
    store.append(c, x.data(), x.data(), 3000);
    FAIL() << "a damaged partial page was read back";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("page " + std::to_string(page) + " of cluster " + std::to_string(c) +
                                         " is torn or corrupt"),
              std::string::npos)
        << e.what();
  }
}

// Reads wait on storage without the store's mutex, beside a thread that appends and rewrites. Every
// block a reader gets holds whole, untorn records; a prefetched image that complete() accepts equals
// exactly what the writer has stored at that moment; at the end every cluster reads back as written.
TEST(PageStore, ReadsBesideWritesSeeConsistentClusters) {
  const int64_t d = 8;
  PageStore store(temp_file("rw.kvs"), d, Layout::kDualHead);
  const int64_t pp = store.per_page();
  // A record's key and value follow from its position, so any record read can be checked alone.
  const auto record = [d](int64_t position) {
    EntryBlock one(d);
    std::vector<float> k(static_cast<size_t>(d)), v(static_cast<size_t>(d));
    for (int64_t t = 0; t < d; ++t) {
      k[t] = static_cast<float>(position) + 0.25f * static_cast<float>(t);
      v[t] = -static_cast<float>(position) - 0.5f * static_cast<float>(t);
    }
    one.push(k.data(), v.data(), position);
    return one;
  };
  const auto well_formed = [&](const EntryBlock& b) {
    std::set<int64_t> seen;
    for (int64_t i = 0; i < b.size(); ++i) {
      const EntryBlock want = record(b.positions[i]);
      if (!seen.insert(b.positions[i]).second) return false;
      for (int64_t t = 0; t < d; ++t)
        if (b.key(i)[t] != want.key(0)[t] || b.value(i)[t] != want.value(0)[t]) return false;
    }
    return true;
  };
  std::vector<EntryBlock> truth;
  std::vector<int64_t> uids;
  int64_t next_position = 0;
  for (int c = 0; c < 6; ++c) {
    EntryBlock b(d);
    for (int64_t i = 0; i < pp + 7 * c; ++i) b.append(record(next_position++));
    truth.push_back(b);
    uids.push_back(store.create(b, c % 2 == 1 ? uids.back() : -1));
  }

  std::atomic<bool> stop{false};
  std::atomic<int64_t> bad{0}, reads{0};
  // A reader that throws (a torn page taken as current) counts as bad and stops.
  const auto until_stopped = [&](auto body) {
    return [&, body] {
      try {
        while (!stop) body();
      } catch (const Error&) {
        bad += 1;
      }
    };
  };
  std::mutex slot_mutex;
  std::vector<PageStore::PageImage> slot;  // the prefetch reader's latest images, for the writer to complete
  std::thread prefetcher(until_stopped([&] {
    std::vector<PageStore::PageImage> images = store.read_pages(uids, 1);
    for (const auto& image : images)
      if (image.version != 0 && !well_formed(image.records)) bad += 1;
    std::lock_guard<std::mutex> lock(slot_mutex);
    slot = std::move(images);
    reads += 1;
  }));
  std::thread reader(until_stopped([&] {
    for (const EntryBlock& b : store.read(uids))
      if (b.size() == 0 || !well_formed(b)) bad += 1;
    reads += 1;
  }));
  int64_t completed = 0;
  std::mt19937 rng(5);
  for (int64_t i = 0; i < 200 * pp; ++i) {
    const size_t c = rng() % uids.size();
    if (i % (5 * pp) == 5 * pp - 1) {  // a split's staying child: the first half
      EntryBlock half(d);
      for (int64_t j = 0; j < truth[c].size() / 2; ++j) half.push_from(truth[c], j);
      truth[c] = half;
      store.rewrite(uids[c], half);
    } else {
      const EntryBlock one = record(next_position++);
      truth[c].append(one);
      store.append(uids[c], one.key(0), one.value(0), one.positions[0]);
    }
    if (i % 16 != 0) continue;
    std::vector<PageStore::PageImage> images;
    {
      std::lock_guard<std::mutex> lock(slot_mutex);
      images = slot;
    }
    for (size_t k = 0; k < images.size(); ++k) {
      EntryBlock out(d);
      if (!store.complete(uids[k], images[k], &out)) continue;
      completed += 1;
      expect_same(out, truth[k]);
    }
  }
  stop = true;
  prefetcher.join();
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_GT(completed, 0) << "no prefetched image was ever current: the check above tested nothing";
  const auto got = store.read(uids);
  for (size_t c = 0; c < uids.size(); ++c) expect_same(got[c], truth[c]);
}

// tails=small: a cluster of one or two entries stays in RAM (reading it costs no storage read); a larger
// one's partial last page goes to storage, where it comes in the same read as its full pages.
TEST(PageStore, ClustersOfOneOrTwoEntriesStayInRam) {
  const int64_t d = 8;
  PageStore store(temp_file("small.kvs"), d, Layout::kDualHead);
  store.set_tail_placement(TailPlacement::kSmallInRam);
  const int64_t pp = store.per_page(), in_ram = RecordFormat{d}.record_bytes();
  const EntryBlock two = random_block(2, d, 0, 1), three = random_block(3, d, 500, 2);
  const EntryBlock large = random_block(pp + 5, d, 1000, 3);
  const int64_t a = store.create(two);
  const int64_t b = store.create(three);
  const int64_t c = store.create(large);
  EXPECT_EQ(store.tail_bytes(), 2 * in_ram) << "only the two-entry cluster is held in RAM";
  expect_same(store.read({a}).front(), two);
  EXPECT_EQ(store.counters().read_ops, 0) << "a cluster held in RAM needs no read";
  expect_same(store.read({b}).front(), three);
  EXPECT_EQ(store.counters().read_ops, 1) << "three entries, under a page at head size 8, are on storage";
  expect_same(store.read({c}).front(), large);
  EXPECT_EQ(store.counters().read_ops, 2);
  EXPECT_EQ(store.counters().read_run_max, 2 * PageStore::kPageBytes) << "full page and partial page in one read";
  // Appends to the small cluster gather in its buffer until the page fills and goes out.
  EntryBlock grown = two;
  for (int64_t i = 2; i < pp; ++i) {
    const EntryBlock one = random_block(1, d, 5000 + i, 10 + i);
    grown.append(one);
    store.append(a, one.key(0), one.value(0), one.positions[0]);
  }
  EXPECT_EQ(store.tail_bytes(), 0);
  expect_same(store.read({a}).front(), grown);
  EXPECT_EQ(store.counters().read_ops, 3);
}

TEST(PageStore, AdjacentClustersAreOneRead) {
  const int64_t d = 8;
  PageStore store(temp_file("r.kvs"), d, Layout::kNaive);
  const int64_t pp = store.per_page();
  const int64_t a = store.create(random_block(2 * pp, d, 0, 1));
  const int64_t b = store.create(random_block(pp, d, 500, 2));
  const int64_t c = store.create(random_block(pp, d, 900, 3));
  store.read({c, a});  // a: pages 1-2, c: page 4; b between them
  EXPECT_EQ(store.counters().read_ops, 2);
  store.read({a, b, c});
  EXPECT_EQ(store.counters().read_ops, 3) << "a, b and c are contiguous: one read";
  EXPECT_EQ(store.counters().read_run_max, 4 * PageStore::kPageBytes);
  store.read({a, c}, 1);  // gap of one page allowed
  EXPECT_EQ(store.counters().read_ops, 4);
}

TEST(PageStore, CommitVerifiesAndDetectsTornPages) {
  const std::string path = temp_file("c.kvs");
  StoreManifest m;
  {
    PageStore store(path, 8, Layout::kDualHead);
    const int64_t a = store.create(random_block(130, 8, 0, 1));
    store.create(random_block(20, 8, 500, 2), a);
    m = store.commit();
  }
  EXPECT_NO_THROW(PageStore::verify(path, m));
  // Flip one byte inside a record of page 1: its checksum must fail.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(PageStore::kPageBytes + 100);
    char c;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(PageStore::kPageBytes + 100);
    f.write(&c, 1);
  }
  try {
    PageStore::verify(path, m);
    FAIL() << "a torn page was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("torn"), std::string::npos) << e.what();
  }
}

TEST(PageStore, ARewriteKilledMidWriteLeavesTheCommittedStoreWhole) {
  const std::string path = temp_file("k.kvs");
  StoreManifest m;
  {
    PageStore store(path, 8, Layout::kDualHead);
    store.create(random_block(300, 8, 0, 1));
    m = store.commit();
  }
  // A second run rewrites the store and is killed half-way through its third page write: it wrote a
  // file of its own beside the store, which is renamed over it only at commit.
  const pid_t child = ::fork();
  if (child == 0) {
    ::setenv("KVC_STORE_CRASH_AFTER_PAGES", "2", 1);
    PageStore store(path, 8, Layout::kDualHead);
    store.create(random_block(300, 8, 0, 9));
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the hook should have killed the writer";
  EXPECT_NO_THROW(PageStore::verify(path, m)) << "the committed store must survive an interrupted rewrite";
  const auto files_beside = [&] {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
      count += entry.path().filename().string().rfind(".k.kvs.tmp.", 0) == 0;
    return count;
  };
  EXPECT_EQ(files_beside(), 1) << "kill -9 leaves the dead run's temporary file";
  {
    PageStore store(path, 8, Layout::kDualHead);  // the next run removes it
    EXPECT_EQ(files_beside(), 1) << "only the new run's own temporary file";
    store.create(random_block(300, 8, 0, 3));
    m = store.commit();
  }
  EXPECT_EQ(files_beside(), 0);
  EXPECT_NO_THROW(PageStore::verify(path, m));
}

TEST(PageStore, ADeviceOrFifoIsRefusedAsAStoreAndNeverRemoved) {
  for (const std::string path : {std::string("/dev/full"), std::string("/dev/null")}) {
    try {
      PageStore store(path, 8, Layout::kDualHead);
      FAIL() << path << " accepted as a store";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path << " must still exist";
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << path;
  }
}

TEST(ClusterCache, LruEvictsLeastRecentlyUsed) {
  const int64_t rec = 72;
  ClusterCache cache(10 * rec, CachePolicy::kLru, rec);
  cache.put(1, random_block(4, 8, 0, 1), false);
  cache.put(2, random_block(4, 8, 10, 2), false);
  ASSERT_NE(cache.get(1), nullptr);                // 1 is now more recent than 2
  cache.put(3, random_block(2, 8, 20, 3), false);  // 10 entries: fits
  cache.put(4, random_block(2, 8, 30, 4), false);  // 12 > 10: evict 2
  EXPECT_TRUE(cache.resident(1));
  EXPECT_FALSE(cache.resident(2));
  EXPECT_TRUE(cache.resident(3) && cache.resident(4));
  EXPECT_EQ(cache.counters().hits, 1);
}

TEST(ClusterCache, AlignedKeepsSmallAndRecentlyUpdatedClusters) {
  const int64_t rec = 72;
  ClusterCache cache(12 * rec, CachePolicy::kAligned, rec, 0.5, 2);
  cache.set_step(10);
  cache.put(1, random_block(6, 8, 0, 1), false);  // large, least recently used? no: first
  cache.put(2, random_block(2, 8, 10, 2), false);
  cache.put(3, random_block(2, 8, 20, 3), true);  // recently updated
  cache.get(2);
  cache.put(4, random_block(4, 8, 30, 4), false);  // 14 > 12: evict the largest non-recent: 1
  EXPECT_FALSE(cache.resident(1));
  EXPECT_TRUE(cache.resident(2) && cache.resident(3) && cache.resident(4));
  // LRU would have evicted 1 too (oldest); make the large one the most recent instead.
  ClusterCache lru(12 * rec, CachePolicy::kLru, rec), aligned(12 * rec, CachePolicy::kAligned, rec, 0.5, 2);
  for (ClusterCache* c : {&lru, &aligned}) {
    c->put(2, random_block(2, 8, 10, 2), false);
    c->put(3, random_block(2, 8, 20, 3), false);
    c->put(1, random_block(6, 8, 0, 1), false);
    c->put(4, random_block(4, 8, 30, 4), false);
  }
  EXPECT_FALSE(lru.resident(2)) << "LRU drops the oldest small cluster";
  EXPECT_TRUE(aligned.resident(2) && aligned.resident(3)) << "aligned drops the large one";
  EXPECT_FALSE(aligned.resident(1));
}

// The eviction rule by brute force: every eviction scans every cluster for the recent bytes
// and the victim. The cache must evict exactly what it evicts, operation by operation.
struct ScanningCacheReference {
  struct Item {
    int64_t size, last_use, last_update, layer;
  };
  int64_t capacity, rec, recent_steps;
  double reserve;
  bool aligned, per_layer;
  int64_t step = 0, tick = 0, layer = 0;
  std::map<int64_t, Item> items;

  int64_t used(int64_t l) const {
    int64_t b = 0;
    for (const auto& [uid, it] : items)
      if (!per_layer || it.layer == l) b += it.size * rec;
    return b;
  }
  void make_room(int64_t keep) {
    const int64_t l = items.count(keep) ? items.at(keep).layer : layer;
    const auto candidate = [&](const Item& it) { return !per_layer || it.layer == l; };
    while (used(l) > capacity) {
      int64_t recent_bytes = 0;
      for (const auto& [uid, it] : items)
        if (candidate(it) && step - it.last_update < recent_steps) recent_bytes += it.size * rec;
      const bool protect = aligned && recent_bytes <= reserve * capacity;
      int64_t victim = -1;
      const Item* best = nullptr;
      for (const auto& [uid, it] : items) {
        if (uid == keep || !candidate(it) || (protect && step - it.last_update < recent_steps)) continue;
        const bool better = best == nullptr ||
                            (aligned ? it.size > best->size || (it.size == best->size && it.last_use < best->last_use)
                                     : it.last_use < best->last_use);
        if (better) best = &it, victim = uid;
      }
      if (victim < 0)
        for (const auto& [uid, it] : items)
          if (uid != keep && candidate(it) && (best == nullptr || it.last_use < best->last_use))
            best = &it, victim = uid;
      if (victim < 0) {
        items.erase(keep);
        return;
      }
      items.erase(victim);
    }
  }
  void put(int64_t uid, int64_t size, bool updated) {
    items.erase(uid);
    if (size * rec > capacity) return;
    items[uid] = {size, ++tick, updated ? step : -1000000, layer};
    make_room(uid);
  }
  void get(int64_t uid) {
    if (items.count(uid)) items[uid].last_use = ++tick;
  }
  void append(int64_t uid) {
    if (!items.count(uid)) return;
    items[uid].size += 1;
    items[uid].last_update = step;
    make_room(uid);
  }
};

TEST(ClusterCache, EvictsExactlyAsAScanOfEveryCluster) {
  const int64_t rec = RecordFormat{8}.record_bytes();
  for (const bool per_layer : {false, true})
    for (const CachePolicy policy : {CachePolicy::kAligned, CachePolicy::kLru}) {
      ClusterCache cache(40 * rec, policy, rec, 0.25, 3, per_layer);
      ScanningCacheReference ref{40 * rec, rec, 3, 0.25, policy == CachePolicy::kAligned, per_layer};
      std::mt19937 gen(per_layer * 2 + (policy == CachePolicy::kAligned));
      const float k[8] = {}, v[8] = {};
      for (int op = 0; op < 4000; ++op) {
        const int64_t uid = gen() % 60, what = gen() % 10;
        if (what < 4) {
          const int64_t size = 1 + gen() % 9;
          const bool updated = gen() % 3 == 0;
          cache.put(uid, random_block(size, 8, 0, uid), updated);
          ref.put(uid, size, updated);
        } else if (what < 7) {
          const bool hit = cache.get(uid) != nullptr;
          ASSERT_EQ(hit, ref.items.count(uid) != 0) << "op " << op;
          ref.get(uid);
        } else if (what < 9) {
          cache.append(uid, k, v, op);
          ref.append(uid);
        } else {
          const int64_t step = ref.step + 1, layer = gen() % 3;
          cache.set_step(step), ref.step = step;
          cache.set_layer(layer), ref.layer = layer;
        }
        for (int64_t u = 0; u < 60; ++u)
          ASSERT_EQ(cache.resident(u), ref.items.count(u) != 0) << "op " << op << " uid " << u;
      }
      EXPECT_GT(cache.counters().evictions, 100);
    }
}

TEST(RetrievalConfig, ParsesSpecsAndRejectsBadOnes) {
  const RetrievalConfig c = RetrievalConfig::parse("adaptive:topk=2,bmax=0,layout=naive,cache=lru,tau_q=0.5");
  EXPECT_EQ(c.strategy, Strategy::kAdaptive);
  EXPECT_EQ(c.topk, 2);
  EXPECT_EQ(c.bmax, 0);
  EXPECT_EQ(c.layout, Layout::kNaive);
  EXPECT_EQ(c.cache_policy, CachePolicy::kLru);
  EXPECT_DOUBLE_EQ(c.tau_quantile, 0.5);
  EXPECT_EQ(c.segment, 2048);
  EXPECT_EQ(RetrievalConfig::parse("static:segment=0").segment, 0);
  EXPECT_EQ(c.tails, TailPlacement::kSmallInRam);
  EXPECT_EQ(RetrievalConfig::parse("static:tails=storage").tails, TailPlacement::kStorage);
  EXPECT_EQ(RetrievalConfig::parse("static:tails=ram").tails, TailPlacement::kRam);
  EXPECT_EQ(RetrievalConfig::parse("static:tails=small").tails, TailPlacement::kSmallInRam);
  const auto message = [](const std::string& spec) {
    try {
      RetrievalConfig::parse(spec);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("bogus").find("unknown strategy 'bogus'"), std::string::npos);
  EXPECT_NE(message("static:colour=red").find("unknown parameter 'colour'"), std::string::npos);
  EXPECT_NE(message("static:segment=-5").find("segment=-5 is not a non-negative integer"), std::string::npos);
  EXPECT_NE(message("adaptive:layout=zigzag").find("layout must be dual or naive"), std::string::npos);
  EXPECT_NE(message("adaptive:tails=disk").find("tails must be small or storage or ram"), std::string::npos);
  EXPECT_NE(message("adaptive:topk=0").find("topk must be at least 1"), std::string::npos);
  EXPECT_NE(message("adaptive:tau_q=2").find("quantile"), std::string::npos);
  EXPECT_NE(message("adaptive:tau_q=nan").find("tau_q=nan is not a number"), std::string::npos);
  EXPECT_NE(message("adaptive:topk=-1").find("topk=-1 is not a non-negative integer"), std::string::npos);
  EXPECT_NE(message("local:every").find("expected key=value"), std::string::npos);
  EXPECT_NE(message("pq:bits=9").find("bits must be in 1..8"), std::string::npos);
  EXPECT_NE(message("pq:bits=0").find("bits must be in 1..8"), std::string::npos);
  EXPECT_NE(message("pq:subspaces=0").find("subspaces must be at least 1"), std::string::npos);
  EXPECT_NE(message("local:metric=manhattan").find("metric must be l2 or cosine"), std::string::npos);
  EXPECT_TRUE(RetrievalConfig::parse("local:metric=cosine").cosine);
}

// --- verify covers every byte of the store ---

// A store with every kind of page: the header, full and partial pages of two clusters sharing a pool,
// never-written slots between them (zero), and the stale pages of a dropped cluster.
StoreManifest store_with_every_page_kind(const std::string& path) {
  PageStore store(path, 8, Layout::kDualHead, /*direct_io=*/false);
  const int64_t pp = store.per_page();
  const int64_t a = store.create(random_block(2 * pp + 3, 8, 0, 1));
  store.create(random_block(5, 8, 500, 2), a);
  store.drop(store.create(random_block(pp + 1, 8, 900, 3)));
  return store.commit();
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(PageStoreVerify, EveryPageKindIsPresent) {
  const std::string path = temp_file("kinds.kvs");
  const StoreManifest m = store_with_every_page_kind(path);
  const auto bytes = file_bytes(path);
  const int64_t pages = static_cast<int64_t>(bytes.size()) / PageStore::kPageBytes;
  std::set<int64_t> used;
  bool partial = false;
  for (const ExtentRecord& r : m.extents) {
    for (int64_t s = 0; s < r.full_pages; ++s) used.insert(r.run_first_page + s);
    if (r.tail_count > 0) used.insert(r.tail_page), partial = true;
  }
  int zero = 0, stale = 0;
  for (int64_t p = 1; p < pages; ++p) {
    if (used.count(p)) continue;
    const auto* page = bytes.data() + p * PageStore::kPageBytes;
    const bool empty = std::all_of(page, page + PageStore::kPageBytes, [](uint8_t b) { return b == 0; });
    (empty ? zero : stale) += 1;
  }
  EXPECT_TRUE(partial);
  EXPECT_GE(zero, 1) << "a never-written slot inside the file";
  EXPECT_GE(stale, 1) << "a dropped cluster's page";
  EXPECT_NO_THROW(PageStore::verify(path, m));
}

// Flips one byte at a time across every class of position — the header's fields and its zero rest,
// page headers (magic, cluster, count, CRC), records, the zero slack after the last record, zero and
// stale unused pages — and expects verify to refuse each, then to accept the restored file.
TEST(PageStoreVerify, RefusesASingleByteFlipAnywhere) {
  const std::string path = temp_file("flips.kvs");
  const StoreManifest m = store_with_every_page_kind(path);
  const auto bytes = file_bytes(path);
  ASSERT_EQ(bytes.size() % PageStore::kPageBytes, 0u);
  std::vector<int64_t> positions;
  for (int64_t page = 0; page * PageStore::kPageBytes < static_cast<int64_t>(bytes.size()); ++page) {
    const int64_t base = page * PageStore::kPageBytes;
    for (int64_t i = 0; i < PageStore::kPageBytes; ++i)
      if (i < 40 || i % 29 == 0 || i >= PageStore::kPageBytes - 64) positions.push_back(base + i);
  }
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  int accepted = 0;
  for (int64_t at : positions) {
    const uint8_t flipped = bytes[static_cast<size_t>(at)] ^ 0x01;
    ASSERT_EQ(::pwrite(fd, &flipped, 1, at), 1);
    try {
      PageStore::verify(path, m);
      ADD_FAILURE() << "a flip at byte " << at << " (page " << at / PageStore::kPageBytes << ") was accepted";
      ++accepted;
    } catch (const Error&) {
    }
    ASSERT_EQ(::pwrite(fd, &bytes[static_cast<size_t>(at)], 1, at), 1);
    if (accepted > 5) break;
  }
  ::close(fd);
  EXPECT_NO_THROW(PageStore::verify(path, m));
}

// Found by tests/fuzz (fuzz_cluster_index): a number too large for JSON in the index's header escaped
// the safetensors reader as nlohmann's out_of_range instead of a kvc::Error.
TEST(ClusterIndex, NumberOverflowInTheHeaderIsAnError) {
  EXPECT_THROW(
      read_index(std::string(KVC_SOURCE_DIR) + "/tests/fuzz/regressions/cluster_index/number-overflow.safetensors"),
      Error);
}

TEST(PageStoreVerify, RefusesBytesBeyondTheStoreAndTruncation) {
  const std::string path = temp_file("length.kvs");
  const StoreManifest m = store_with_every_page_kind(path);
  const auto bytes = file_bytes(path);
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.put('\0');
  }
  EXPECT_THROW(PageStore::verify(path, m), Error) << "a byte appended";
  // Pages a pool reserved but never wrote may exist as zeros up to file_pages; not one page more.
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(m.file_pages * PageStore::kPageBytes)), 0);
  EXPECT_NO_THROW(PageStore::verify(path, m));
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>((m.file_pages + 1) * PageStore::kPageBytes)), 0);
  EXPECT_THROW(PageStore::verify(path, m), Error) << "a zero page beyond file_pages";
  // Cut at the last page a cluster holds (unused pages past the end read as never written).
  int64_t last_used = 0;
  for (const ExtentRecord& r : m.extents)
    last_used = std::max({last_used, r.tail_page, r.run_first_page + r.full_pages - 1});
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(last_used * PageStore::kPageBytes)), 0);
  EXPECT_THROW(PageStore::verify(path, m), Error) << "a used page cut off";
  StoreManifest wrong = m;
  wrong.dim = 16;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_NO_THROW(PageStore::verify(path, m));
  EXPECT_THROW(PageStore::verify(path, wrong), Error) << "an index whose head_dim differs from the store's";
}

}  // namespace
}  // namespace kvc::retrieval
