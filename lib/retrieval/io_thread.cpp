#include "retrieval/io_thread.h"

namespace kvc::retrieval {

IoThread::IoThread() : worker_([this] { loop(); }) {}

IoThread::~IoThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  ready_.notify_one();
  worker_.join();
}

void IoThread::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stop requested and nothing left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();  // a packaged_task: exceptions reach the caller's future
  }
}

}  // namespace kvc::retrieval
