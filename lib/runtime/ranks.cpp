#include "runtime/ranks.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>

#include "util/checked_number.h"
#include "util/error.h"

#if defined(C10_USE_GLOG)
#include <glog/logging.h>
#endif

namespace kvc {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

int env_int(const char* name, int64_t lo, int64_t hi) {
  const auto value = parse_integer(env(name));
  KVC_CHECK(value && *value >= lo && *value <= hi, "environment variable {}='{}': expected an integer in {}..{}", name,
            env(name), lo, hi);
  return static_cast<int>(*value);
}

// c10d's messages run over many lines with a C++ trace; the first says what happened.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

RankEnvironment rank_environment() {
  RankEnvironment e;
  if (!env("WORLD_SIZE").empty() || !env("RANK").empty()) {
    e.launcher = "torchrun";
    e.world = env_int("WORLD_SIZE", 1, 65536);
    e.rank = env_int("RANK", 0, e.world - 1);
  } else if (!env("SLURM_NTASKS").empty()) {
    e.launcher = "slurm";
    e.world = env_int("SLURM_NTASKS", 1, 65536);
    e.rank = env_int("SLURM_PROCID", 0, e.world - 1);
  }
  if (!env("MASTER_ADDR").empty()) e.master_addr = env("MASTER_ADDR");
  if (!env("MASTER_PORT").empty()) e.master_port = env_int("MASTER_PORT", 1, 65535);
  return e;
}

struct Ranks::Group {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
};

Ranks::Ranks() = default;
Ranks::~Ranks() = default;

std::shared_ptr<Ranks> Ranks::join(const RankEnvironment& env, const std::string& backend,
                                   std::chrono::seconds timeout) {
  KVC_CHECK(backend == "gloo" || backend == "nccl", "--dist-backend: unknown backend '{}' (expected gloo or nccl)",
            backend);
  KVC_CHECK(backend == "gloo", "--dist-backend nccl: this build's LibTorch has no NCCL; use --dist-backend gloo");
  auto ranks = std::make_shared<Ranks>();
  ranks->rank_ = env.rank;
  ranks->world_ = env.world;
  ranks->timeout_ = timeout;
  if (env.world == 1) return ranks;
  const std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  const std::string not_joined = fmt::format(
      "rank {} of {}: the ranks did not all join at {} within {} s (--dist-timeout); check that every rank was "
      "started with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE",
      env.rank, env.world, where, timeout.count());
#if defined(C10_USE_GLOG)
  // c10d logs each failed socket attempt over several lines; the one-line errors below say what matters.
  FLAGS_minloglevel = google::GLOG_FATAL;
#endif
  auto group = std::make_unique<Group>();
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(env.master_port);
    o.isServer = env.rank == 0;
    o.numWorkers = env.world;
    o.waitWorkers = true;
    o.timeout = timeout;
    group->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  } catch (const std::exception& e) {
    const std::string why = e.what();
    if (env.rank == 0 && why.find("ddress already in use") != std::string::npos) {
      fail("rank 0 cannot listen on {} (MASTER_PORT): the port is in use; choose another MASTER_PORT", where);
    }
    fail("{}", not_joined);
  }
  try {
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->timeout = timeout;
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr));
    group->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(group->store, env.rank, env.world, options);
  } catch (const std::exception& e) {
    fail("{} (Gloo: {})", not_joined, first_line(e.what()));
  }
  ranks->group_ = std::move(group);
  return ranks;
}

void Ranks::run_collective(const char* what, const std::function<void()>& exchange) const {
  try {
    exchange();
  } catch (const std::exception& e) {
    fail("rank {} of {}: {} over the ranks failed (a rank stopped, or none answered within {} s): {}", rank_, world_,
         what, timeout_.count(), first_line(e.what()));
  }
}

void Ranks::sum(std::vector<at::Tensor>& tensors) const {
  if (world_ == 1 || tensors.empty()) return;
  for (at::Tensor& t : tensors) {
    run_collective("a sum", [&] {
      std::vector<at::Tensor> one = {t};
      group_->gloo->allreduce(one)->wait();
    });
  }
}

void Ranks::broadcast(std::string& bytes) const {
  if (world_ == 1) return;
  at::Tensor size = at::tensor({static_cast<int64_t>(bytes.size())}, at::kLong);
  run_collective("a broadcast from rank 0", [&] {
    std::vector<at::Tensor> one = {size};
    group_->gloo->broadcast(one)->wait();
  });
  const int64_t n = size.item<int64_t>();
  at::Tensor data = at::empty({n}, at::kByte);
  if (is_root()) std::memcpy(data.data_ptr<uint8_t>(), bytes.data(), static_cast<size_t>(n));
  if (n > 0) {
    run_collective("a broadcast from rank 0", [&] {
      std::vector<at::Tensor> one = {data};
      group_->gloo->broadcast(one)->wait();
    });
  }
  bytes.assign(reinterpret_cast<const char*>(data.data_ptr<uint8_t>()), static_cast<size_t>(n));
}

bool Ranks::any(bool flag) const {
  at::Tensor t = at::tensor({flag ? 1.0 : 0.0}, at::kDouble);
  std::vector<at::Tensor> one = {t};
  sum(one);
  return t.item<double>() > 0;
}

void Ranks::check_same(const std::string& what, const std::string& value) const {
  if (world_ == 1) return;
  // A 26-bit hash, so that the float64 sums of it and of its square are exact: both match world copies
  // of this rank's value iff every rank has that value (the squares' sum is least when all are equal).
  const double h = static_cast<double>(std::hash<std::string>{}(value) & ((uint64_t{1} << 26) - 1));
  at::Tensor s = at::tensor({h, h * h}, at::kDouble);
  std::vector<at::Tensor> t = {s};
  sum(t);
  const bool same = s[0].item<double>() == h * world_ && s[1].item<double>() == h * h * world_;
  KVC_CHECK(same,
            "rank {} of {}: the ranks were started with different {}; start every rank with the same flags "
            "and data",
            rank_, world_, what);
}

}  // namespace kvc
