#pragma once
// One background thread for the replay rank's long file work: a dump, the replay's part of a
// checkpoint, or the restore at start. On a slow disk (a multi-GB buffer on NFS) these take
// minutes; on the replay's own loop they would stop every message, and the learners, hearing
// nothing for 2 x run.stall_timeout_s, would end the job. With the work here the loop goes on
// (buffer/replay_server.h says what it may touch meanwhile) and tells the learners it is busy.
//
// The job reports progress by calling tick() (once per block of items written or read): a job
// with no tick for a while is stuck (a hung file system), which the loop reports. While the job
// says it is flushing (the file's last writes and fsync, which give no ticks and can take long
// on a network file system for a large file), the loop allows it longer. A thread still
// running when the IoJob is destroyed (the rank is failing) is detached, never joined: a job
// stuck in a system call must not hang the rank's exit.
#include <atomic>
#include <exception>
#include <functional>
#include <string>
#include <thread>

namespace mpirl::buffer {

class IoJob {
 public:
  using Tick = std::function<void()>;
  struct Progress {
    Tick tick;                             // a block done
    std::function<void(bool)> flushing;    // true from the final flush and fsync, false after
  };
  IoJob() = default;
  IoJob(const IoJob&) = delete;
  IoJob& operator=(const IoJob&) = delete;
  ~IoJob();

  // Runs fn(progress) on the background thread; `what` names it in the log ("dump (interval)").
  // One job at a time: start() while one runs is a logic error.
  void start(std::string what, std::function<void(const Progress&)> fn);
  bool running() const { return thread_.joinable(); }
  bool finished() const { return running() && done_.load(std::memory_order_acquire); }
  // Joins a finished job; returns its exception (null when it succeeded).
  std::exception_ptr collect();
  const std::string& what() const { return what_; }
  double started_at() const { return started_; }
  int64_t ticks() const { return ticks_.load(std::memory_order_relaxed); }
  bool flushing() const { return flushing_.load(std::memory_order_relaxed); }
  // Seconds since the job last ticked (or started); call from the owning thread only.
  double idle_seconds();

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  std::atomic<int64_t> ticks_{0};
  std::atomic<bool> flushing_{false};
  std::exception_ptr error_;
  std::string what_;
  double started_ = 0, last_tick_seen_at_ = 0;
  int64_t last_ticks_ = 0;
};

}  // namespace mpirl::buffer
