#include "learner/inference_monitor.h"

#include <algorithm>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "comm/transport.h"
#include "comm/wire.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::learner {

InferenceMonitor::InferenceMonitor(const Comms& comms) : comms_(comms) {
  if (comms.rank == 0) ranks_ = comms.layout.inference_ranks();
}

void InferenceMonitor::poll(int64_t learner_version) {
  if (ranks_.empty()) return;
  size_t n = 0;
  int src;
  while ((src = try_recv(comms_.world, MPI_ANY_SOURCE, kTagInferStats, buf_, &n)) >= 0) {
    const auto msg = wire::decode(buf_.data(), n, src, {wire::Kind::InferStats});
    if (comms_.layout.role_of(src) != Role::Inference)
      throw Error(fmt::format("learner 0: inference statistics from rank {}, which is not an inference rank", src));
    if (msg.env.arrays.size() != 1 || msg.env.arrays[0].dtype != wire::DType::U8)
      throw Error(fmt::format("learner 0: InferStats from rank {} is malformed (expected one uint8 array)", src));
    try {
      last_[src] = nlohmann::json::parse(msg.array<char>(0), msg.array<char>(0) + msg.env.arrays[0].elements());
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("learner 0: InferStats from rank {} is not JSON: {}", src, e.what()));
    }
    const int64_t v = last_[src].value("version", int64_t(-1));
    if (v >= 0 && learner_version >= 0 && !last_[src].value("final", false)) {  // not after the stop
      const int64_t lag = std::max<int64_t>(0, learner_version - v);
      ++lag_n_;
      lag_sum_ += lag;
      lag_max_ = std::max(lag_max_, lag);
    }
  }
}

nlohmann::json InferenceMonitor::combine(const std::vector<nlohmann::json>& stats) {
  double batches = 0, rows = 0, requests = 0, fwd = 0, lat = 0, waiting = 0, lat_max = 0, fwd_max = 0;
  double rows_max = 0;
  nlohmann::json hist = nlohmann::json::object();
  for (const auto& s : stats) {
    const double b = s.value("batches", 0.0), q = s.value("requests", 0.0);
    batches += b;
    rows += s.value("rows", 0.0);
    requests += q;
    fwd += s.value("forward_ms_mean", 0.0) * b;
    lat += s.value("latency_ms_mean", 0.0) * q;
    waiting += s.value("waiting_requests_mean", 0.0) * b;
    lat_max = std::max(lat_max, s.value("latency_ms_max", 0.0));
    fwd_max = std::max(fwd_max, s.value("forward_ms_max", 0.0));
    rows_max = std::max(rows_max, s.value("rows_max", 0.0));
    if (s.contains("batch_rows_hist"))
      for (const auto& [k, v] : s["batch_rows_hist"].items()) hist[k] = hist.value(k, int64_t(0)) + v.get<int64_t>();
  }
  const double nb = batches > 0 ? batches : 1, nq = requests > 0 ? requests : 1;
  return {{"batches", int64_t(batches)},       {"rows", int64_t(rows)},
          {"requests", int64_t(requests)},     {"rows_mean", batches > 0 ? rows / nb : 0.0},
          {"rows_max", int64_t(rows_max)},     {"forward_ms_mean", fwd / nb},
          {"forward_ms_max", fwd_max},         {"latency_ms_mean", lat / nq},
          {"latency_ms_max", lat_max},         {"waiting_requests_mean", waiting / nb},
          {"batch_rows_hist", hist}};
}

nlohmann::json InferenceMonitor::row() const {
  if (last_.empty()) return nullptr;
  std::vector<nlohmann::json> w;
  for (const auto& [r, j] : last_) w.push_back(j.at("window"));
  auto out = combine(w);
  out.erase("batch_rows_hist");  // per row: scalars only (the summary keeps the histogram)
  int64_t versions = -1;
  for (const auto& [r, j] : last_) versions = std::max<int64_t>(versions, j.value("version", int64_t(-1)));
  out["version"] = versions;
  if (lag_n_ > 0) {
    out["acting_lag_mean"] = double(lag_sum_) / double(lag_n_);
    out["acting_lag_max"] = lag_max_;
  }
  return out;
}

nlohmann::json InferenceMonitor::summary() const {
  if (ranks_.empty()) return nullptr;
  std::vector<nlohmann::json> totals;
  nlohmann::json per = nlohmann::json::array();
  for (const auto& [r, j] : last_) {
    totals.push_back(j.at("total"));
    nlohmann::json e = j;
    e.erase("window");
    per.push_back(e);
  }
  int finals = 0;
  for (const auto& [r, j] : last_) finals += j.value("final", false);
  nlohmann::json out = {{"ranks", per}, {"total", combine(totals)}, {"inference_ranks", ranks_.size()},
                        {"final_reports", finals}, {"acting_lag_samples", lag_n_}};
  if (lag_n_ > 0) {
    out["acting_lag_mean"] = double(lag_sum_) / double(lag_n_);
    out["acting_lag_max"] = lag_max_;
  }
  return out;
}

void InferenceMonitor::wait_finals(const std::function<void()>& while_waiting, double timeout_s) {
  auto missing = [&] {
    std::vector<std::string> out;
    for (int r : ranks_) {
      auto it = last_.find(r);
      if (it == last_.end() || !it->second.value("final", false)) out.push_back(fmt::format("{} @ {}", r, comms_.host(r)));
    }
    return out;
  };
  const double t0 = now_seconds();
  Backoff b;
  for (;;) {
    poll(-1);
    const auto m = missing();
    if (m.empty()) return;
    if (timeout_s > 0 && now_seconds() - t0 > timeout_s)
      throw Error(fmt::format("learner 0: no final report from inference rank(s) {} for {:.0f} s after the stop "
                              "(run.stall_timeout_s): a stalled inference rank",
                              fmt::join(m, ", "), timeout_s));
    if (while_waiting) while_waiting();
    b.idle();
  }
}

}  // namespace mpirl::learner
