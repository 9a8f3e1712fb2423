#include "buffer/io_job.h"

#include "core/clock.h"
#include "core/error.h"

namespace mpirl::buffer {

IoJob::~IoJob() {
  if (thread_.joinable()) thread_.detach();
}

void IoJob::start(std::string what, std::function<void(const Progress&)> fn) {
  MPIRL_CHECK(!running(), "replay: '{}' started while '{}' is still running", what, what_);
  what_ = std::move(what);
  error_ = nullptr;
  done_.store(false);
  ticks_.store(0);
  flushing_.store(false);
  last_ticks_ = 0;
  started_ = last_tick_seen_at_ = now_seconds();
  thread_ = std::thread([this, fn = std::move(fn)] {
    try {
      Progress p;
      p.tick = [this] { ticks_.fetch_add(1, std::memory_order_relaxed); };
      p.flushing = [this](bool on) {
        flushing_.store(on, std::memory_order_relaxed);
        ticks_.fetch_add(1, std::memory_order_relaxed);  // the phase change is progress too
      };
      fn(p);
    } catch (...) {
      error_ = std::current_exception();
    }
    done_.store(true, std::memory_order_release);
  });
}

std::exception_ptr IoJob::collect() {
  MPIRL_CHECK(finished(), "replay: collect() of '{}' before it finished", what_);
  thread_.join();
  auto e = error_;
  error_ = nullptr;
  return e;
}

double IoJob::idle_seconds() {
  const double now = now_seconds();
  const int64_t t = ticks();
  if (t != last_ticks_) {
    last_ticks_ = t;
    last_tick_seen_at_ = now;
  }
  return now - last_tick_seen_at_;
}

}  // namespace mpirl::buffer
