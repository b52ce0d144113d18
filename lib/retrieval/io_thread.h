#pragma once
// One background thread that runs storage reads in submission order, so a decode step can compute
// attention for KV head h while the reads for head h+1 are in flight (compute/I/O overlap).
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace kvc::retrieval {

class IoThread {
 public:
  IoThread();
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  template <typename F>
  auto submit(F job) -> std::future<decltype(job())> {
    auto task = std::make_shared<std::packaged_task<decltype(job())()>>(std::move(job));
    auto result = task->get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.emplace_back([task] { (*task)(); });
    }
    ready_.notify_one();
    return result;
  }

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread worker_;
};

// `job` on `io` when there is one, else at once on the calling thread; its result as a future either
// way (an exception reaches get() in both cases).
template <typename F>
auto run_on(IoThread* io, F job) -> std::future<decltype(job())> {
  if (io != nullptr) return io->submit(std::move(job));
  std::packaged_task<decltype(job())()> task(std::move(job));
  auto result = task.get_future();
  task();
  return result;
}

}  // namespace kvc::retrieval
