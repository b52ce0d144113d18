#include "retrieval/retrieval_layer_cache.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <unordered_map>
#include <unordered_set>

#include "retrieval/host_transfer.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

LayoutFactory<RetrievalLayerCache> retrieval_layer_factory(const AttentionShape& shape,
                                                           std::shared_ptr<const Rope> rope,
                                                           std::shared_ptr<RetrievalShared> shared) {
  return [=](int64_t) { return std::make_unique<RetrievalLayerCache>(shape, rope, shared); };
}

RetrievalLayerCache::RetrievalLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope,
                                         std::shared_ptr<RetrievalShared> shared)
    : shape_(shape), rope_(std::move(rope)), shared_(std::move(shared)), slot_(shared_->num_layers++) {
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    heads_.emplace_back(shared_.get(), shape_.head_dim);
    HeadState s;
    s.all = s.staging = s.sinks = s.recent = EntryBlock(shape_.head_dim);
    state_.push_back(std::move(s));
  }
}

void RetrievalLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  // The cache lives in RAM and on storage whatever the model's device. The new entries wait for
  // attend(): on a GPU they come down with the step's queries, which choosing clusters needs anyway, in
  // one copy and so one wait per layer and step.
  if (waiting_.keys.defined()) store_waiting({});
  const int64_t T = keys.size(1);
  if (slot_ == 0 && T == 1) {
    shared_->step += 1;
    shared_->cache->set_step(shared_->step);
  }
  waiting_ = {rope_->apply(keys, positions), values, positions.to(at::kLong)};
  length_ += T;
}

at::Tensor RetrievalLayerCache::store_waiting(const at::Tensor& queries) {
  std::vector<at::Tensor> parts = {waiting_.keys, waiting_.values, waiting_.positions};
  if (queries.defined()) parts.push_back(queries);
  waiting_ = {};
  bool on_host = true;
  for (const at::Tensor& t : parts) on_host = on_host && t.is_cpu();
  if (!on_host) parts = copy_to_host_together(parts);
  store_entries(parts[0].to(at::kFloat).contiguous(), parts[1].to(at::kFloat).contiguous(), parts[2].contiguous());
  return queries.defined() ? parts[3].to(at::kFloat).contiguous() : at::Tensor();
}

void RetrievalLayerCache::bring_centroids_back() {
  CentroidSpill* spill = shared_->centroid_spill.get();
  if (!spill || !centroids_out_) return;
  const SpilledCentroids read = spill->take(slot_);
  const float* next = read.data();
  int64_t bytes = 0;
  for (HeadIndex& h : heads_) {
    next = h.centroid_table().restore(next);
    bytes += h.centroid_bytes();
  }
  spill->note_resident(bytes);
  spill->release(read);
  centroid_bytes_noted_ = bytes;
  centroids_out_ = false;
}

void RetrievalLayerCache::send_centroids_out() {
  CentroidSpill* spill = shared_->centroid_spill.get();
  bool built = false;
  for (const HeadIndex& h : heads_) built = built || h.built();
  if (!spill || centroids_out_ || !built) return;
  int64_t bytes = 0, floats = 0;
  for (const HeadIndex& h : heads_) bytes += h.centroid_bytes(), floats += h.centroid_table().spilled_floats();
  spill->note_resident(bytes - centroid_bytes_noted_);  // the tables grew (new clusters) since last noted
  float* out = spill->start_write(slot_, floats);
  for (HeadIndex& h : heads_) out = h.centroid_table().spill(out);
  spill->note_resident(-bytes);
  centroid_bytes_noted_ = 0;
  spill->finish_write();
  centroids_out_ = true;
  // Pipeline 1: the next layer's centroids come in while this layer's output projection, its MLP and
  // the next layer's Q/K/V projections run (after the last layer: the first, for the next step).
  spill->read_ahead((slot_ + 1) % shared_->num_layers);
}

void RetrievalLayerCache::enter_step() {
  shared_->cache->set_layer(slot_);
  if (shared_->virtualizer) shared_->virtualizer->enter(slot_);
  bring_centroids_back();
}

void RetrievalLayerCache::end_step() {
  send_centroids_out();
  if (shared_->virtualizer) shared_->virtualizer->leave(slot_, (slot_ + 1) % shared_->num_layers);
}

void RetrievalLayerCache::store_entries(const at::Tensor& k, const at::Tensor& v, const at::Tensor& p) {
  const int64_t T = k.size(1), d = shape_.head_dim;
  const RetrievalConfig& cfg = shared_->config;
  enter_step();  // placing new entries reads the centroids and may split cached clusters
  const auto u0 = Clock::now();
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    HeadState& s = state_[h];
    for (int64_t t = 0; t < T; ++t) {
      const float* kp = k.data_ptr<float>() + (h * T + t) * d;
      const float* vp = v.data_ptr<float>() + (h * T + t) * d;
      const int64_t pos = p.data_ptr<int64_t>()[t];
      if (shared_->measure || cfg.strategy == Strategy::kNone) s.all.push(kp, vp, pos);
      if (!heads_[h].built()) s.staging.push(kp, vp, pos);
      else if (cfg.strategy == Strategy::kPQ) s.unwritten.push(kp, vp, pos);
      else heads_[h].add(kp, vp, pos);
      if (s.sinks.size() < cfg.sinks) s.sinks.push(kp, vp, pos);
      if (t >= T - cfg.recent) s.recent.push(kp, vp, pos);  // older ones of a long prompt would be trimmed
    }
    // Keep the last `recent` entries (trimmed in batches so the copy is amortised).
    if (s.recent.size() > 2 * cfg.recent + 16) {
      EntryBlock r(d);
      for (int64_t i = s.recent.size() - cfg.recent; i < s.recent.size(); ++i) r.push_from(s.recent, i);
      s.recent = std::move(r);
    }
    if (picks_entries(cfg.strategy) && heads_[h].built()) write_chunks(h);
  }
  if (T == 1) shared_->update_seconds += std::chrono::duration<double>(Clock::now() - u0).count();
}

void RetrievalLayerCache::write_chunks(int64_t h) {
  HeadState& s = state_[h];
  const int64_t pp = shared_->store->per_page();
  if (shared_->config.strategy == Strategy::kPQ) {
    // Whole pages go to storage; RAM keeps their keys' codes and the entries after the last page.
    int64_t written = 0;
    while (s.unwritten.size() - written >= pp) {
      EntryBlock page(shape_.head_dim);
      for (int64_t i = written; i < written + pp; ++i) page.push_from(s.unwritten, i);
      s.chunk_uids.push_back(shared_->store->create(page));
      s.pq.encode(page.keys.data(), pp, s.codes);
      s.chunked += pp;
      written += pp;
    }
    if (written > 0) {
      EntryBlock rest(shape_.head_dim);
      for (int64_t i = written; i < s.unwritten.size(); ++i) rest.push_from(s.unwritten, i);
      s.unwritten = std::move(rest);
    }
    return;
  }
  while (s.all.size() - s.chunked >= pp) {
    EntryBlock page(shape_.head_dim);
    for (int64_t i = s.chunked; i < s.chunked + pp; ++i) page.push_from(s.all, i);
    s.chunk_uids.push_back(shared_->store->create(page));
    s.chunked += pp;
  }
}

EntryBlock RetrievalLayerCache::all_entries(int64_t h) {
  HeadState& s = state_[h];
  if (!heads_[h].built()) return s.staging;
  if (shared_->config.strategy == Strategy::kNone) return s.all;
  if (shared_->config.strategy == Strategy::kPQ) {
    EntryBlock out(shape_.head_dim);
    for (auto& b : shared_->store->read(s.chunk_uids, shared_->config.gap_pages)) out.append(b);
    out.append(s.unwritten);
    return out;
  }
  std::vector<int64_t> uids;
  for (const auto& c : heads_[h].clusters()) uids.push_back(c.uid);
  EntryBlock out(shape_.head_dim);
  for (auto& b : shared_->store->read(uids, shared_->config.gap_pages)) out.append(b);
  for (const auto& c : heads_[h].clusters()) out.append(c.delayed);
  out.append(heads_[h].pending());
  return out;
}

at::Tensor RetrievalLayerCache::attend_subsets(const at::Tensor& queries, const at::Tensor& q_positions,
                                               const std::vector<EntryBlock>& subsets) const {
  const int64_t G = shape_.group_size(), d = shape_.head_dim;
  // Chosen on the host, attended on the queries' device: every head's entries are packed into one
  // buffer of keys and values and one of positions; on a GPU both are pinned and copied up unwaited.
  int64_t total = 0;
  for (const EntryBlock& b : subsets) total += b.size();
  at::Tensor kv = host_staging_buffer({2, total, d}, at::kFloat, queries.device());
  at::Tensor pos = host_staging_buffer({total}, at::kLong, queries.device());
  int64_t offset = 0;
  for (const EntryBlock& b : subsets) {
    std::copy(b.keys.begin(), b.keys.end(), kv[0].data_ptr<float>() + offset * d);
    std::copy(b.values.begin(), b.values.end(), kv[1].data_ptr<float>() + offset * d);
    std::copy(b.positions.begin(), b.positions.end(), pos.data_ptr<int64_t>() + offset);
    offset += b.size();
  }
  kv = queue_copy_to(kv, queries.device()).to(queries.scalar_type());
  pos = queue_copy_to(pos, queries.device());
  const at::Tensor q_pos = q_positions.to(queries.device());
  at::Tensor out = at::empty_like(queries);
  AttentionShape one{G, 1, d, shape_.sliding_window};
  offset = 0;
  for (size_t h = 0; h < subsets.size(); ++h) {
    const int64_t n = subsets[h].size(), head = static_cast<int64_t>(h);
    const at::Tensor keys = kv[0].narrow(0, offset, n).unsqueeze(0), values = kv[1].narrow(0, offset, n).unsqueeze(0);
    out.narrow(0, head * G, G)
        .copy_(grouped_attention(one, queries.narrow(0, head * G, G), q_pos, keys, values,
                                 pos.narrow(0, offset, n).unsqueeze(0), {}, nullptr));
    offset += n;
  }
  return out;
}

at::Tensor RetrievalLayerCache::attend_exact(const at::Tensor& queries, const at::Tensor& qf,
                                             const at::Tensor& q_positions) {
  const int64_t G = shape_.group_size(), T = queries.size(1), d = shape_.head_dim;
  std::vector<EntryBlock> entries;
  std::vector<int64_t> unbuilt;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    entries.push_back(all_entries(h));
    if (!heads_[h].built()) unbuilt.push_back(h);
  }
  const at::Tensor out = attend_subsets(queries, q_positions, entries);
  if (unbuilt.empty()) return out;
  // Prefill done: cluster the prompt, heads in parallel; its queries [T, G, d] give the co-retrieval order.
  const auto c0 = Clock::now();
  const int64_t n = static_cast<int64_t>(unbuilt.size());
  std::vector<PrefillPartition> parts(static_cast<size_t>(n));
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t h = unbuilt[i];
      const at::Tensor qg = qf.narrow(0, h * G, G).permute({1, 0, 2}).contiguous();
      parts[i] = HeadIndex::partition(shared_->config, state_[h].staging, qg.data_ptr<float>(), T, G);
      const RetrievalConfig& cfg = shared_->config;
      if (cfg.strategy == Strategy::kPQ)
        state_[h].pq.train(state_[h].staging.keys.data(), state_[h].staging.size(), d, cfg.pq_subspaces, cfg.pq_bits,
                           cfg.kmeans_iterations, /*seed=*/0);
    }
  });
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = unbuilt[i];
    heads_[h].build(state_[h].staging, parts[i]);
    if (shared_->config.strategy == Strategy::kPQ) state_[h].unwritten = std::move(state_[h].staging);
    if (picks_entries(shared_->config.strategy)) write_chunks(h);
    state_[h].staging = EntryBlock(d);
  }
  shared_->cluster_seconds += std::chrono::duration<double>(Clock::now() - c0).count();
  return out;
}

void RetrievalLayerCache::measure_recall(int64_t h, const at::Tensor& q, const at::Tensor& q_position,
                                         const std::vector<int64_t>& positions) {
  HeadState& s = state_[h];
  const int64_t n = s.all.size(), d = shape_.head_dim, G = q.size(0);
  // The exact attention over every entry (column sums of one query are its probabilities).
  DenseEntries all(at::from_blob(s.all.keys.data(), {1, n, d}, at::kFloat),
                   at::from_blob(s.all.values.data(), {1, n, d}, at::kFloat),
                   at::from_blob(s.all.positions.data(), {1, n}, at::kLong));
  AttentionProbe probe;
  probe.column_sums = true;
  AttentionStats stats;
  blocked_attention({G, 1, d, shape_.sliding_window}, q.to(at::kFloat).view({G, 1, d}), q_position, all, probe, &stats);
  std::vector<int64_t> idx;
  for (int64_t pos : positions) {
    auto it = std::lower_bound(s.all.positions.begin(), s.all.positions.end(), pos);
    if (it != s.all.positions.end() && *it == pos) idx.push_back(it - s.all.positions.begin());
  }
  const at::Tensor sel = at::from_blob(idx.data(), {static_cast<int64_t>(idx.size())}, at::kLong).clone();
  const double recall = stats.column_sums.index_select(1, sel).sum(1).mean().item<double>();
  shared_->recall_sum += recall;
  shared_->recall_count += 1;
}

at::Tensor RetrievalLayerCache::attend(const at::Tensor& queries, const at::Tensor& q_positions,
                                       const AttentionProbe& probe, AttentionStats* stats) {
  // The queries on the host, for choosing clusters; this layer's new entries are stored first.
  const at::Tensor qf =
      waiting_.keys.defined() ? store_waiting(queries) : queries.to(at::kCPU, at::kFloat).contiguous();
  const auto t0 = Clock::now();
  const int64_t T = queries.size(1);
  bool any_built = false;
  for (const auto& hd : heads_) any_built = any_built || hd.built();
  if (T > 1 || !any_built) {
    const at::Tensor out = attend_exact(queries, qf, q_positions);
    end_step();  // a later prompt chunk: placed, then out again
    return out;
  }
  enter_step();
  const RetrievalConfig& cfg = shared_->config;
  const int64_t G = shape_.group_size(), d = shape_.head_dim;
  Prefetcher* prefetch = shared_->prefetch.get();
  double io_wait = prefetch ? prefetch->collect(slot_) : 0.0;

  // 1. Choose per head; 2. read every head's misses in one batch (runs coalesce across heads).
  std::vector<std::vector<int64_t>> chosen(static_cast<size_t>(shape_.num_kv_heads));
  std::vector<std::vector<int64_t>> misses(static_cast<size_t>(shape_.num_kv_heads));
  std::unordered_map<int64_t, EntryBlock> fetched;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    const float* q = qf.data_ptr<float>() + h * G * d;
    if (picks_entries(cfg.strategy)) {
      HeadState& s = state_[h];
      const int64_t budget = cfg.budget > 0 ? cfg.budget : cfg.topk * cfg.cluster_size;
      // Summed over the group: one score per written key, exact (none) or from its codes (pq).
      const auto s0 = Clock::now();
      const at::Tensor summed = qf.narrow(0, h * G, G).view({G, d}).sum(0).contiguous();
      std::vector<float> approximate;
      at::Tensor exact;
      const float* scores = nullptr;  // read in place: from the codes' scores (pq) or the product (none)
      if (cfg.strategy == Strategy::kPQ) {
        approximate = s.pq.approximate_scores(s.codes, s.chunked, s.pq.score_table(summed.data_ptr<float>()));
        scores = approximate.data();
      } else {
        const at::Tensor written = at::from_blob(s.all.keys.data(), {s.chunked, d}, at::kFloat);
        exact = at::mv(written, summed).contiguous();
        scores = exact.data_ptr<float>();
      }
      std::vector<std::pair<float, int64_t>> scored(static_cast<size_t>(s.chunked));
      for (int64_t i = 0; i < s.chunked; ++i) scored[i] = {-scores[i], i};
      const size_t top = std::min<size_t>(static_cast<size_t>(budget), scored.size());
      std::partial_sort(scored.begin(), scored.begin() + top, scored.end());
      for (size_t i = 0; i < top; ++i) chosen[h].push_back(scored[i].second);
      std::sort(chosen[h].begin(), chosen[h].end());
      shared_->select_seconds += std::chrono::duration<double>(Clock::now() - s0).count();
      int64_t last_chunk = -1;
      for (int64_t i : chosen[h]) {
        const int64_t c = i / shared_->store->per_page();
        if (c == last_chunk) continue;
        last_chunk = c;
        if (const EntryBlock* hit = shared_->cache->get(s.chunk_uids[c])) fetched.emplace(s.chunk_uids[c], *hit);
        else misses[h].push_back(s.chunk_uids[c]);
      }
      continue;
    }
    const auto s0 = Clock::now();
    chosen[h] = heads_[h].select(q, G);
    shared_->select_seconds += std::chrono::duration<double>(Clock::now() - s0).count();
    heads_[h].set_active(chosen[h]);
    for (int64_t j : chosen[h]) {
      const int64_t uid = heads_[h].clusters()[j].uid;
      // Hits are copied now: later inserts in this step may evict them.
      if (const EntryBlock* hit = shared_->cache->get(uid)) fetched.emplace(uid, *hit);
      else misses[h].push_back(uid);
    }
  }
  // Misses this layer's prefetch already holds (unchanged since) need no read; they enter the RAM
  // cache below exactly as a demand read would. What the layer wanted is the next step's prediction.
  const std::vector<std::vector<int64_t>> head_misses = misses;
  std::unordered_map<int64_t, EntryBlock> prefetched;
  if (prefetch) {
    std::vector<int64_t> wanted;
    for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
      std::vector<int64_t> still;
      for (int64_t uid : misses[h]) {
        EntryBlock block(d);
        if (prefetch->take(uid, &block)) prefetched.emplace(uid, std::move(block));
        else still.push_back(uid);
      }
      wanted.insert(wanted.end(), misses[h].begin(), misses[h].end());
      misses[h] = std::move(still);
    }
    for (const auto& [uid, block] : fetched) wanted.push_back(uid);
    prefetch->record(slot_, std::move(wanted));
  }
  // 2. Reads per head, on the I/O thread when there is one: head h+1 loads while head h computes.
  PageStore* store = shared_->store.get();
  std::vector<std::future<std::vector<EntryBlock>>> reads(static_cast<size_t>(shape_.num_kv_heads));
  if (shared_->io) {
    for (int64_t h = 0; h < shape_.num_kv_heads; ++h)
      if (!misses[h].empty())
        reads[h] =
            shared_->io->submit([store, uids = misses[h], gap = cfg.gap_pages] { return store->read(uids, gap); });
  }

  // 3. Per head: sinks + recent + retrieved, deduplicated by position; exact attention over them.
  std::vector<EntryBlock> subsets;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    HeadState& s = state_[h];
    std::unordered_map<int64_t, EntryBlock> arrived;
    if (!misses[h].empty()) {
      const auto w0 = Clock::now();
      std::vector<EntryBlock> loaded = shared_->io ? reads[h].get() : store->read(misses[h], cfg.gap_pages);
      io_wait += std::chrono::duration<double>(Clock::now() - w0).count();
      for (size_t i = 0; i < misses[h].size(); ++i) arrived.emplace(misses[h][i], std::move(loaded[i]));
    }
    for (int64_t uid : head_misses[h]) {  // in choice order: the cache sees what it saw without prefetch
      auto it = arrived.find(uid);
      EntryBlock& block = it != arrived.end() ? it->second : prefetched.at(uid);
      shared_->cache->put(uid, block, false);
      fetched[uid] = std::move(block);
    }
    EntryBlock subset(d);
    std::unordered_set<int64_t> seen;
    const auto add_block = [&](const EntryBlock& b, int64_t from) {
      for (int64_t i = from; i < b.size(); ++i)
        if (seen.insert(b.positions[i]).second) subset.push_from(b, i);
    };
    add_block(s.sinks, 0);
    add_block(s.recent, std::max<int64_t>(0, s.recent.size() - cfg.recent));
    if (picks_entries(cfg.strategy)) {
      // The chosen entries as read back from their pages (page c holds entries c*pp .. c*pp+pp-1).
      const int64_t pp = shared_->store->per_page();
      for (int64_t i : chosen[h]) {
        const EntryBlock& page = fetched.at(s.chunk_uids[i / pp]);
        if (seen.insert(page.positions[i % pp]).second) subset.push_from(page, i % pp);
      }
      // The entries after the last whole page are still in RAM.
      if (cfg.strategy == Strategy::kPQ) add_block(s.unwritten, 0);
      else add_block(s.all, s.chunked);
    } else {
      for (int64_t j : chosen[h]) {
        const int64_t uid = heads_[h].clusters()[j].uid;
        add_block(heads_[h].take_loaded(j, fetched.at(uid)), 0);
      }
      add_block(heads_[h].pending(), 0);
    }
    shared_->retrieved_entries += subset.size();
    if (shared_->measure)
      measure_recall(h, qf.narrow(0, h * G, G).view({G, d}), q_positions.to(at::kCPU), subset.positions);
    subsets.push_back(std::move(subset));
  }
  const at::Tensor out = attend_subsets(queries, q_positions, subsets);
  end_step();
  // Read ahead for the next storage layer (after the last: the first, at the next step) while this
  // layer's output projection, the MLP and the next Q/K/V projections run.
  if (prefetch) prefetch->issue((slot_ + 1) % shared_->num_layers, *shared_->cache);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  shared_->compute_seconds += elapsed - io_wait;
  shared_->io_wait_seconds += io_wait;
  return out;
}

void RetrievalLayerCache::retain(const at::Tensor& indices) {
  fail("the retrieval cache keeps every entry on storage; it cannot be combined with eviction (--press)");
}

at::Tensor RetrievalLayerCache::lengths() const {
  return at::full({shape_.num_kv_heads}, length_, at::TensorOptions().dtype(at::kLong));
}

CacheFootprint RetrievalLayerCache::footprint() const {
  CacheFootprint f;
  const RecordFormat& stored = shared_->store->format();
  // Entries in RAM are fp32 whatever the records' type on storage.
  const int64_t rec = RecordFormat{shape_.head_dim}.record_bytes();
  f.entries = length_ * shape_.num_kv_heads;
  f.payload_bytes = f.entries * (stored.key_bytes() + stored.value_bytes());
  // What is really in RAM: sinks, recent window, buffers, centroids (the shared cluster cache and the
  // store's write buffers are counted once, by the first layer).
  int64_t resident = 0;
  for (size_t h = 0; h < state_.size(); ++h) {
    const auto& s = state_[h];
    resident += (s.sinks.size() + s.recent.size() + s.staging.size() + s.all.size() + s.unwritten.size()) * rec;
    resident += static_cast<int64_t>(s.codes.size()) + s.pq.codebook_bytes();
    resident += heads_[h].pending().size() * rec;
    resident += heads_[h].centroid_bytes();
    for (const auto& c : heads_[h].clusters())
      resident += c.delayed.size() * rec + static_cast<int64_t>(sizeof(Cluster));
  }
  if (slot_ == 0) resident += shared_->cache->used_bytes() + shared_->store->tail_bytes();
  f.resident_bytes = resident;
  f.ram_bytes = resident;
  f.step_read_bytes = resident;
  return f;
}

}  // namespace kvc::retrieval
