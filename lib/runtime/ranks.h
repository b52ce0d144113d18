#pragma once
// Data-parallel runs over PyTorch's distributed runtime (c10d): which process this is, read from the
// environment torchrun or Slurm sets; the processes joined through c10d's TCP store; sums all-reduced
// by its Gloo process group. One process needs none of it: a world of one never opens a socket.
#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvc {

struct RankEnvironment {
  int rank = 0, world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher;  // "torchrun", "slurm", or "" (one process)
};

// torchrun's RANK / WORLD_SIZE, else Slurm's SLURM_PROCID / SLURM_NTASKS; MASTER_ADDR and MASTER_PORT
// (default 127.0.0.1:29500). Malformed or inconsistent values are one-line errors.
RankEnvironment rank_environment();

class Ranks {
 public:
  // This process alone.
  Ranks();
  // Joins the environment's world over `backend` ("gloo"; "nccl" is refused: this build's LibTorch has
  // Gloo). Waits at most `timeout` for every rank, and for every later collective.
  static std::shared_ptr<Ranks> join(const RankEnvironment& env, const std::string& backend,
                                     std::chrono::seconds timeout);
  ~Ranks();

  int rank() const { return rank_; }
  int world() const { return world_; }
  bool is_root() const { return rank_ == 0; }
  // Sums each CPU tensor over the ranks, in place.
  void sum(std::vector<at::Tensor>& tensors) const;
  // Every rank gets rank 0's `bytes` (the others' are replaced).
  void broadcast(std::string& bytes) const;
  // True on every rank when `flag` is true on any (e.g. one rank was interrupted).
  bool any(bool flag) const;
  // Fails on every rank, naming `what`, unless every rank passed the same `value`.
  void check_same(const std::string& what, const std::string& value) const;

 private:
  struct Group;
  // Runs one exchange; a failure (a rank gone, a timeout) becomes one line naming `what`.
  void run_collective(const char* what, const std::function<void()>& exchange) const;
  int rank_ = 0, world_ = 1;
  std::chrono::seconds timeout_{0};
  std::unique_ptr<Group> group_;
};

}  // namespace kvc
