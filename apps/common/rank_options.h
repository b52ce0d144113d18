#pragma once
// The flags of a tool that runs data-parallel over ranks (kvc-calibrate): the ranks themselves come
// from the launcher's environment (torchrun: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Slurm:
// SLURM_PROCID, SLURM_NTASKS), the flags choose the backend and how long to wait for the others.
#include <CLI/CLI.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "runtime/ranks.h"

namespace kvc::cli {

struct RankOptions {
  std::string backend = "gloo";
  int timeout_seconds = 300;

  void add_to(CLI::App& app) {
    app.add_option("--dist-backend", backend,
                   "With several ranks (torchrun or Slurm environment): c10d backend, gloo (nccl needs a CUDA build)")
        ->capture_default_str();
    app.add_option("--dist-timeout", timeout_seconds,
                   "Seconds to wait for every rank to join, and for each exchange between ranks")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
  }

  // This process's place among the ranks; one process when no launcher set the environment.
  std::shared_ptr<Ranks> join() const {
    return Ranks::join(rank_environment(), backend, std::chrono::seconds(timeout_seconds));
  }
};

}  // namespace kvc::cli
