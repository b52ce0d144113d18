#include "retrieval/head_index.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "util/error.h"

namespace kvc::retrieval {
namespace {

// Prompt queries that vote on the storage order: evenly spaced, at most this many, so ordering costs
// the same for any prompt length.
constexpr int64_t kOrderingQueries = 1024;

// Sum over the group's query heads (the mean's argmax is the sum's).
void sum_group(const float* queries, int64_t G, int64_t d, float* out) {
  std::fill(out, out + d, 0.0f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < d; ++i) out[i] += queries[g * d + i];
}

// A greedy chain through the co-retrieval counts: start at the cluster retrieved together with others
// most, then always move to the unplaced cluster retrieved most often with the current one (lowest
// index on ties; the lowest unplaced one when none was).
std::vector<int64_t> chain_order(const std::vector<std::unordered_map<int64_t, double>>& co) {
  const int64_t k = static_cast<int64_t>(co.size());
  std::vector<int64_t> order;
  std::vector<bool> placed(static_cast<size_t>(k), false);
  int64_t cur = 0;
  double best_total = -1;
  for (int64_t j = 0; j < k; ++j) {
    double total = 0;
    for (const auto& [other, count] : co[j]) total += count;
    if (total > best_total) best_total = total, cur = j;
  }
  int64_t lowest_unplaced = 0;
  while (static_cast<int64_t>(order.size()) < k) {
    order.push_back(cur);
    placed[cur] = true;
    while (lowest_unplaced < k && placed[lowest_unplaced]) ++lowest_unplaced;
    int64_t next = lowest_unplaced;
    double next_count = 0;
    for (const auto& [other, count] : co[cur])
      if (!placed[other] && (count > next_count || (count == next_count && other < next)))
        next = other, next_count = count;
    if (next >= k) break;
    cur = next;
  }
  return order;
}

}  // namespace

int64_t HeadIndex::add_cluster(const EntryBlock& members, int64_t partner) {
  Cluster c;
  const int64_t row = centroids_.add_row();
  c.stats = ClusterStats::of(members.keys.data(), members.size(), dim_, centroids_.row(row));
  centroids_.refresh(row);
  c.delayed = EntryBlock(dim_);
  c.uid = shared_->store->create(members, partner);
  clusters_.push_back(std::move(c));
  return static_cast<int64_t>(clusters_.size()) - 1;
}

PrefillPartition HeadIndex::partition(const RetrievalConfig& cfg, const EntryBlock& entries, const float* queries,
                                      int64_t T, int64_t G) {
  PrefillPartition p;
  if (picks_entries(cfg.strategy)) return p;
  const int64_t d = entries.dim;
  KMeansOptions opt;
  opt.iterations = cfg.kmeans_iterations;
  opt.directions = cfg.cosine;
  p.clusters = kmeans_in_segments(entries.keys.data(), entries.size(), d, cfg.cluster_size, cfg.segment, opt);
  const int64_t k = p.clusters.k;
  p.order.resize(static_cast<size_t>(k));
  std::iota(p.order.begin(), p.order.end(), 0);
  if (!cfg.coorder || k <= 2 || T == 0) return p;
  // Order on storage: clusters read together (the same prompt query's top clusters) sit next to each
  // other (the back of one pool meets the next pool's front).
  const int64_t voters = std::min(T, kOrderingQueries);
  at::Tensor summed = at::empty({voters, d}, at::kFloat);
  for (int64_t v = 0; v < voters; ++v) {
    const int64_t t = voters == T ? v : v * T / voters;
    sum_group(queries + t * G * d, G, d, summed.data_ptr<float>() + v * d);
  }
  const at::Tensor centroids = at::from_blob(p.clusters.centroids.data(), {k, d}, at::kFloat);
  const at::Tensor scores = at::mm(summed, centroids.t()).contiguous();
  const int64_t top = std::min(cfg.topk, k);
  std::vector<std::unordered_map<int64_t, double>> co(static_cast<size_t>(k));
  std::vector<std::pair<float, int64_t>> scored(static_cast<size_t>(k));
  for (int64_t v = 0; v < voters; ++v) {
    const float* row = scores.data_ptr<float>() + v * k;
    for (int64_t j = 0; j < k; ++j) scored[j] = {-row[j], j};
    std::partial_sort(scored.begin(), scored.begin() + top, scored.end());
    for (int64_t a = 0; a < top; ++a)
      for (int64_t b = 0; b < top; ++b)
        if (a != b) co[scored[a].second][scored[b].second] += 1;
  }
  p.order = chain_order(co);
  return p;
}

void HeadIndex::build(const EntryBlock& entries, const PrefillPartition& part) {
  const RetrievalConfig& cfg = shared_->config;
  built_ = true;
  if (picks_entries(cfg.strategy)) return;
  const KMeansResult& km = part.clusters;
  std::vector<EntryBlock> members(static_cast<size_t>(km.k), EntryBlock(dim_));
  for (int64_t i = 0; i < entries.size(); ++i) members[km.assign[i]].push_from(entries, i);
  int64_t max_pages = 1;
  for (const auto& m : members) max_pages = std::max(max_pages, m.size() / shared_->store->per_page() + 1);
  shared_->store->set_pool_pages(cfg.pool_pages > 0 ? cfg.pool_pages : std::max<int64_t>(4, 2 * max_pages));
  // Dual-head pairs: chain positions 2i and 2i+1 share a pool.
  for (size_t n = 0; n < part.order.size(); ++n) {
    const int64_t partner = (n % 2 == 1) ? clusters_.back().uid : -1;
    add_cluster(members[part.order[n]], partner);
  }
  // τ_h: the chosen quantile of this head's prefill cluster variances (clusters of 2+ entries).
  std::vector<double> vars;
  for (const auto& c : clusters_)
    if (c.stats.n > 1) vars.push_back(c.stats.variance());
  if (!vars.empty()) {
    std::sort(vars.begin(), vars.end());
    const size_t at = static_cast<size_t>(std::min<double>(vars.size() - 1, cfg.tau_quantile * (vars.size() - 1)));
    tau_ = vars[at] * cfg.tau_scale;
  }
}

std::vector<int64_t> HeadIndex::select(const float* queries, int64_t G) const {
  std::vector<float> summed(static_cast<size_t>(dim_));
  sum_group(queries, G, dim_, summed.data());
  centroids_.scores(summed.data(), scratch_);
  std::vector<std::pair<float, int64_t>> scored;
  scored.reserve(clusters_.size());
  for (int64_t j = 0; j < static_cast<int64_t>(clusters_.size()); ++j)
    if (clusters_[j].stats.n > 0) scored.emplace_back(-scratch_[j], j);
  std::vector<int64_t> out;
  const int64_t budget = shared_->config.budget;
  if (budget > 0) {  // an entry budget: best clusters until it is reached, so strategies read alike
    // Sort only as far as needed: double the sorted prefix until it holds the budget.
    size_t sorted = std::min(scored.size(), static_cast<size_t>(std::max<int64_t>(8, 2 * shared_->config.topk)));
    for (;;) {
      std::partial_sort(scored.begin(), scored.begin() + sorted, scored.end());
      int64_t total = 0;
      size_t used = 0;
      while (used < sorted && total < budget) total += clusters_[scored[used++].second].stats.n;
      if (total >= budget || sorted == scored.size()) {
        for (size_t i = 0; i < used; ++i) out.push_back(scored[i].second);
        return out;
      }
      sorted = std::min(scored.size(), 2 * sorted);
    }
  }
  const size_t top = std::min<size_t>(static_cast<size_t>(shared_->config.topk), scored.size());
  std::partial_sort(scored.begin(), scored.begin() + top, scored.end());
  for (size_t i = 0; i < top; ++i) out.push_back(scored[i].second);
  return out;
}

const float* HeadIndex::centroid(int64_t j) const {
  KVC_CHECK(centroids_.resident(), "internal: a centroid read while the table is on storage");
  return centroids_.row(j);
}

int64_t HeadIndex::nearest(const float* key) const {
  centroids_.distances(key, scratch_);
  int64_t best = -1;
  for (int64_t j = 0; j < static_cast<int64_t>(clusters_.size()); ++j)
    if (clusters_[j].stats.n > 0 && (best < 0 || scratch_[j] < scratch_[best])) best = j;
  return best;
}

double HeadIndex::mean_variance() const {
  double s = 0;
  int64_t n = 0;
  for (const auto& c : clusters_)
    if (c.stats.n > 0) s += c.stats.variance(), n += 1;
  return n > 0 ? s / n : 0.0;
}

EntryBlock HeadIndex::load(int64_t j) {
  const int64_t uid = clusters_[j].uid;
  if (const EntryBlock* hit = shared_->cache->get(uid)) return *hit;
  // The store reads the cluster's pages in one operation.
  const IoCounters before = shared_->store->counters();
  EntryBlock block = std::move(shared_->store->read({uid}, 0).front());
  const IoCounters read = shared_->store->counters().minus(before);
  shared_->split_read_bytes += read.read_bytes;
  shared_->split_read_ops += read.read_ops;
  return block;
}

void HeadIndex::split(int64_t j, EntryBlock members) {
  Cluster& c = clusters_[j];
  members.append(c.delayed);
  buffered_ -= c.delayed.size();
  c.delayed.clear();
  const int64_t uid = c.uid;
  KMeansOptions opt;
  opt.iterations = 10;
  opt.seed = static_cast<uint64_t>(shared_->splits);
  opt.directions = shared_->config.cosine;
  const KMeansResult km = kmeans(members.keys.data(), members.size(), dim_, 2, opt);
  EntryBlock a(dim_), b(dim_);
  for (int64_t i = 0; i < members.size(); ++i) (km.k < 2 || km.assign[i] == 0 ? a : b).push_from(members, i);
  // One child stays where the cluster was; the other goes to a new place (a pool's free end).
  shared_->store->rewrite(uid, a);
  c.stats = ClusterStats::of(a.keys.data(), a.size(), dim_, centroids_.row(j));
  centroids_.refresh(j);
  shared_->cache->erase(uid);
  shared_->cache->put(uid, a, true);
  shared_->splits += 1;
  if (b.empty()) return;
  shared_->split_moved_bytes += b.size() * shared_->store->record_bytes();
  const int64_t nb = add_cluster(b, -1);
  shared_->cache->put(clusters_[nb].uid, b, true);
}

void HeadIndex::cluster_pending() {
  if (pending_.empty()) return;
  const int64_t k = std::max<int64_t>(1, pending_.size() / shared_->config.cluster_size);
  KMeansOptions opt;
  opt.iterations = shared_->config.kmeans_iterations;
  opt.directions = shared_->config.cosine;
  const KMeansResult km = kmeans(pending_.keys.data(), pending_.size(), dim_, k, opt);
  std::vector<EntryBlock> members(static_cast<size_t>(km.k), EntryBlock(dim_));
  for (int64_t i = 0; i < pending_.size(); ++i) members[km.assign[i]].push_from(pending_, i);
  int64_t partner = -1;
  for (auto& m : members) {
    if (m.empty()) continue;
    const int64_t j = add_cluster(m, partner);
    partner = partner < 0 ? clusters_[j].uid : -1;
    shared_->cache->put(clusters_[j].uid, m, true);
  }
  pending_.clear();
}

void HeadIndex::add(const float* key, const float* value, int64_t position) {
  const RetrievalConfig& cfg = shared_->config;
  if (picks_entries(cfg.strategy)) return;
  if (cfg.strategy == Strategy::kLocal) {
    pending_.push(key, value, position);
    if (++steps_since_local_ >= cfg.local_every) {
      cluster_pending();
      steps_since_local_ = 0;
    }
    return;
  }
  const int64_t j = nearest(key);
  if (j < 0) {  // no cluster yet (tiny prompt): the first entry founds one
    EntryBlock one(dim_);
    one.push(key, value, position);
    add_cluster(one, -1);
    return;
  }
  Cluster& c = clusters_[j];
  const bool append = cfg.strategy == Strategy::kStatic || c.stats.variance_with(centroids_.row(j), key, dim_) <= tau_;
  if (append) {
    c.stats.add(centroids_.row(j), key, dim_);
    centroids_.refresh(j);
    shared_->store->append(c.uid, key, value, position);
    shared_->cache->append(c.uid, key, value, position);
    return;
  }
  const bool in_ram = shared_->cache->resident(c.uid) || std::find(active_.begin(), active_.end(), j) != active_.end();
  if (in_ram) {  // split now: the members are already in memory
    EntryBlock members = load(j);
    members.push(key, value, position);
    split(j, std::move(members));
    return;
  }
  // Delayed split: keep the entry in RAM until C_j is next loaded.
  c.stats.add(centroids_.row(j), key, dim_);
  centroids_.refresh(j);
  c.delayed.push(key, value, position);
  buffered_ += 1;
  if (buffered_ > cfg.bmax) {
    int64_t most = 0;
    for (int64_t i = 1; i < static_cast<int64_t>(clusters_.size()); ++i)
      if (clusters_[i].delayed.size() > clusters_[most].delayed.size()) most = i;
    shared_->forced_splits += 1;
    split(most, load(most));
  }
}

EntryBlock HeadIndex::take_loaded(int64_t index, EntryBlock loaded) {
  Cluster& c = clusters_[index];
  if (c.delayed.empty()) return loaded;
  // The flagged cluster is in RAM now: split it (no extra read); the step attends both children.
  EntryBlock all = loaded;
  all.append(c.delayed);
  shared_->delayed_splits += 1;
  split(index, std::move(loaded));
  return all;
}

}  // namespace kvc::retrieval
