#include "buffer/dump_scheduler.h"

#include <signal.h>

#include <atomic>

#include <spdlog/spdlog.h>

#include "buffer/hdf5_dump.h"
#include "buffer/replay.h"
#include "core/text.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::buffer {
namespace {
std::atomic<bool> g_dump_requested{false};
extern "C" void on_sigusr2(int) { g_dump_requested = true; }

std::string cut(const std::string& s) { return s.size() <= kMaxStatusString ? s : utf8_prefix(s, kMaxStatusString - 3) + "..."; }
}  // namespace

DumpScheduler::DumpScheduler(const Config& cfg, const std::string& run_dir, int shard)
    : cfg_(cfg), path_(shard_dump_path(cfg, run_dir, shard)), last_(now_seconds()) {
  status_.path = cut(path_);
  struct sigaction sa {};
  sa.sa_handler = on_sigusr2;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, nullptr);
}

DumpScheduler::Outcome DumpScheduler::write(const DumpSnapshot& snap, const DumpOptions& opts) const {
  Outcome o;
  try {
    o.info = dump_replay(snap, path_, cfg_.env.id, cfg_.resolved_toml, opts);
    o.ok = true;
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

void DumpScheduler::record(const Outcome& o, const char* why) {
  last_ = now_seconds();
  if (o.ok) {
    ++status_.dumps;
    status_.items = o.info.items;
    status_.checksum = o.info.checksum;
    status_.seconds = o.info.seconds;
    spdlog::info("replay dump ({}): {} items, CRC-32 {:08x}, {:.2f} s -> {}", why, o.info.items, o.info.checksum,
                 o.info.seconds, o.info.path);
  } else {
    ++status_.failures;
    status_.last_error = cut(o.error);
    spdlog::error("replay dump ({}) failed, the run goes on: {}", why, o.error);
  }
}

const char* DumpScheduler::due(bool stopping) {
  if (cfg_.replay.dump == "never") return nullptr;
  const char* why = nullptr;
  if (g_dump_requested.exchange(false)) why = "SIGUSR2";
  else if (cfg_.replay.dump_interval_s > 0 && !stopping && now_seconds() - last_ >= cfg_.replay.dump_interval_s)
    why = "interval";
  return why;
}

bool DumpScheduler::finish(const ReplayBuffer& rb, const DumpInfo* same_as) {
  if (cfg_.replay.dump != "end") return true;
  if (same_as) {
    try {
      auto info = link_dump(same_as->path, *same_as, path_);
      ++status_.dumps;
      status_.items = info.items;
      status_.checksum = info.checksum;
      status_.seconds = info.seconds;
      spdlog::info("replay dump (end of run): the final checkpoint's, linked: {} items, CRC-32 {:08x} -> {}", info.items,
                   info.checksum, info.path);
      return true;
    } catch (const std::exception& e) {
      spdlog::warn("replay dump (end of run): cannot link the checkpoint's ({}); writing it in full", e.what());
    }
  }
  const Outcome o = write(DumpSnapshot::of(rb), {});
  record(o, "end of run");
  status_.final_failed = !o.ok;
  return o.ok;
}

}  // namespace mpirl::buffer
