#include "retrieval/head_index.h"

#include <algorithm>
#include <numeric>

#include "retrieval/kmeans.h"

namespace kvc::retrieval {
namespace {

double dot(const float* a, const double* b, int64_t d) {
  double s = 0;
  for (int64_t i = 0; i < d; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

int64_t HeadIndex::add_cluster(const EntryBlock& members, int64_t partner) {
  Cluster c;
  c.stats = ClusterStats::of(members.keys.data(), members.size(), dim_);
  c.delayed = EntryBlock(dim_);
  c.uid = shared_->store->create(members, partner);
  clusters_.push_back(std::move(c));
  return static_cast<int64_t>(clusters_.size()) - 1;
}

void HeadIndex::build(const EntryBlock& entries, const float* queries, int64_t T, int64_t G) {
  const RetrievalConfig& cfg = shared_->config;
  built_ = true;
  if (cfg.strategy == Strategy::kNone) return;
  const int64_t k = std::max<int64_t>(1, entries.size() / cfg.cluster_size);
  KMeansOptions opt;
  opt.iterations = cfg.kmeans_iterations;
  opt.threads = cfg.threads;
  const KMeansResult km = kmeans(entries.keys.data(), entries.size(), dim_, k, opt);
  std::vector<EntryBlock> members(static_cast<size_t>(km.k), EntryBlock(dim_));
  for (int64_t i = 0; i < entries.size(); ++i) members[km.assign[i]].push_from(entries, i);
  std::vector<ClusterStats> stats;
  for (const auto& m : members) stats.push_back(ClusterStats::of(m.keys.data(), m.size(), dim_));

  // Order on storage: a greedy chain through the co-retrieval counts of the prompt's queries, so
  // clusters read together sit next to each other (the back of one pool meets the next pool's front).
  std::vector<int64_t> order(static_cast<size_t>(km.k));
  std::iota(order.begin(), order.end(), 0);
  if (cfg.coorder && km.k > 2) {
    std::vector<double> co(static_cast<size_t>(km.k * km.k), 0.0);
    std::vector<std::pair<double, int64_t>> scored(static_cast<size_t>(km.k));
    const int64_t top = std::min(cfg.topk, km.k);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < km.k; ++j) {
        double s = 0;
        for (int64_t g = 0; g < G; ++g) s += dot(queries + (t * G + g) * dim_, stats[j].mean.data(), dim_);
        scored[j] = {-s, j};
      }
      std::partial_sort(scored.begin(), scored.begin() + top, scored.end());
      for (int64_t a = 0; a < top; ++a)
        for (int64_t b = 0; b < top; ++b)
          if (a != b) co[scored[a].second * km.k + scored[b].second] += 1;
    }
    std::vector<bool> placed(static_cast<size_t>(km.k), false);
    int64_t cur = 0;
    double best_total = -1;
    for (int64_t j = 0; j < km.k; ++j) {
      const double total = std::accumulate(co.begin() + j * km.k, co.begin() + (j + 1) * km.k, 0.0);
      if (total > best_total) best_total = total, cur = j;
    }
    for (int64_t n = 0; n < km.k; ++n) {
      order[n] = cur;
      placed[cur] = true;
      int64_t next = -1;
      for (int64_t j = 0; j < km.k; ++j)
        if (!placed[j] && (next < 0 || co[cur * km.k + j] > co[cur * km.k + next])) next = j;
      if (next < 0) break;
      cur = next;
    }
  }
  int64_t max_pages = 1;
  for (const auto& m : members) max_pages = std::max(max_pages, m.size() / shared_->store->per_page() + 1);
  shared_->store->set_pool_pages(cfg.pool_pages > 0 ? cfg.pool_pages : std::max<int64_t>(4, 2 * max_pages));
  // Dual-head pairs: chain positions 2i and 2i+1 share a pool.
  for (size_t n = 0; n < order.size(); ++n) {
    const int64_t partner = (n % 2 == 1) ? clusters_.back().uid : -1;
    add_cluster(members[order[n]], partner);
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
  std::vector<std::pair<double, int64_t>> scored;
  for (int64_t j = 0; j < static_cast<int64_t>(clusters_.size()); ++j) {
    if (clusters_[j].stats.n == 0) continue;
    double s = 0;
    for (int64_t g = 0; g < G; ++g) s += dot(queries + g * dim_, clusters_[j].stats.mean.data(), dim_);
    scored.emplace_back(-s, j);
  }
  std::vector<int64_t> out;
  const int64_t budget = shared_->config.budget;
  if (budget > 0) {  // an entry budget: best clusters until it is reached, so strategies read alike
    std::sort(scored.begin(), scored.end());
    int64_t total = 0;
    for (const auto& [score, j] : scored) {
      if (total >= budget) break;
      out.push_back(j);
      total += clusters_[j].stats.n;
    }
    return out;
  }
  const size_t top = std::min<size_t>(static_cast<size_t>(shared_->config.topk), scored.size());
  std::partial_sort(scored.begin(), scored.begin() + top, scored.end());
  for (size_t i = 0; i < top; ++i) out.push_back(scored[i].second);
  return out;
}

int64_t HeadIndex::nearest(const float* key) const {
  int64_t best = -1;
  double best_d = 0;
  for (int64_t j = 0; j < static_cast<int64_t>(clusters_.size()); ++j) {
    if (clusters_[j].stats.n == 0) continue;
    const double d = clusters_[j].stats.sq_distance(key);
    if (best < 0 || d < best_d) best = j, best_d = d;
  }
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
  // The store reads the cluster's full pages in one operation (its tail is in RAM).
  const int64_t pages = shared_->store->entries(uid) / shared_->store->per_page();
  shared_->split_read_bytes += pages * PageStore::kPageBytes;
  shared_->split_read_ops += pages > 0;
  EntryBlock block = std::move(shared_->store->read({uid}, 0).front());
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
  const KMeansResult km = kmeans(members.keys.data(), members.size(), dim_, 2, opt);
  EntryBlock a(dim_), b(dim_);
  for (int64_t i = 0; i < members.size(); ++i) (km.k < 2 || km.assign[i] == 0 ? a : b).push_from(members, i);
  // One child stays where the cluster was; the other goes to a new place (a pool's free end).
  shared_->store->rewrite(uid, a);
  c.stats = ClusterStats::of(a.keys.data(), a.size(), dim_);
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
  if (cfg.strategy == Strategy::kNone) return;
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
  const bool append = cfg.strategy == Strategy::kStatic || c.stats.variance_with(key) <= tau_;
  if (append) {
    c.stats.add(key);
    shared_->store->append(c.uid, key, value, position);
    shared_->cache->append(c.uid, key, value, position);
    return;
  }
  const bool in_ram = shared_->cache->resident(c.uid) ||
                      std::find(active_.begin(), active_.end(), j) != active_.end();
  if (in_ram) {  // split now: the members are already in memory
    EntryBlock members = load(j);
    members.push(key, value, position);
    split(j, std::move(members));
    return;
  }
  // Delayed split: keep the entry in RAM until C_j is next loaded.
  c.stats.add(key);
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
