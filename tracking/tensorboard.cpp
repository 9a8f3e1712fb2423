#include "tracking/tensorboard.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "tracking/proto/tensorboard.pb.h"
#include "tracking/record_io.h"

namespace mpirl::tracking {
namespace {

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

tb::Event event_at(int64_t step) {
  tb::Event e;
  e.set_wall_time(wall_time());
  e.set_step(step);
  return e;
}

void add_scalars(tb::Summary& s, const nlohmann::json& row, const std::string& prefix) {
  for (const auto& [key, v] : row.items()) {
    if (v.is_object()) {
      add_scalars(s, v, prefix + key + "/");
      continue;
    }
    if (!v.is_number()) continue;  // strings, booleans, nulls, arrays
    const double x = v.get<double>();
    if (!std::isfinite(x)) continue;
    auto* value = s.add_value();
    value->set_tag(prefix + key);
    value->set_simple_value(float(x));
  }
}

}  // namespace

std::string event_file_name() {
  static std::atomic<int> count{0};
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof(host), "localhost");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  return fmt::format("events.out.tfevents.{}.{}.{}.{}", secs, host, ::getpid(), count++);
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("cannot create TensorBoard directory '{}': {}", dir, ec.message()));
  path_ = (std::filesystem::path(dir) / event_file_name()).string();
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) throw Error(fmt::format("cannot open TensorBoard event file '{}'", path_));
  auto e = event_at(0);
  e.set_file_version("brain.Event:2");
  write_event(e.SerializeAsString());
}

void TensorBoardWriter::write_event(const std::string& serialized_event) {
  out_ << frame_record(serialized_event);
  out_.flush();
  if (!out_) throw Error(fmt::format("cannot write TensorBoard event file '{}'", path_));
}

int TensorBoardWriter::write_scalars(const nlohmann::json& row, int64_t step, const std::string& prefix) {
  auto e = event_at(step);
  add_scalars(*e.mutable_summary(), row, prefix);
  const int n = e.summary().value_size();
  if (n > 0) write_event(e.SerializeAsString());
  return n;
}

void TensorBoardWriter::write_text(const std::string& tag, const std::string& markdown, int64_t step) {
  auto e = event_at(step);
  auto* value = e.mutable_summary()->add_value();
  value->set_tag(tag);
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* t = value->mutable_tensor();
  t->set_dtype(tb::DT_STRING);
  t->mutable_tensor_shape();  // rank 0: a shape with no dims
  t->add_string_val(markdown);
  write_event(e.SerializeAsString());
}

void TensorBoardWriter::write_histogram(const std::string& tag, const std::vector<double>& values, int64_t step,
                                        int buckets) {
  MPIRL_CHECK(buckets >= 1, "histogram '{}': {} buckets", tag, buckets);
  std::vector<double> finite;
  for (double v : values)
    if (std::isfinite(v)) finite.push_back(v);
  if (finite.empty()) return;
  auto e = event_at(step);
  auto* value = e.mutable_summary()->add_value();
  value->set_tag(tag);
  auto* h = value->mutable_histo();
  const auto [lo, hi] = std::minmax_element(finite.begin(), finite.end());
  const double min = *lo, max = *hi;
  double sum = 0, sum_squares = 0;
  for (double v : finite) sum += v, sum_squares += v * v;
  h->set_min(min);
  h->set_max(max);
  h->set_num(double(finite.size()));
  h->set_sum(sum);
  h->set_sum_squares(sum_squares);
  // Bucket i holds the values in (limit[i-1], limit[i]] (the first one everything up to limit[0]).
  const int k = max > min ? buckets : 1;
  std::vector<double> limits(static_cast<size_t>(k)), counts(static_cast<size_t>(k), 0.0);
  for (int i = 0; i < k; ++i) limits[size_t(i)] = i == k - 1 ? max : min + (max - min) * (i + 1) / k;
  for (double v : finite) counts[size_t(std::lower_bound(limits.begin(), limits.end(), v) - limits.begin())] += 1;
  for (int i = 0; i < k; ++i) {
    h->add_bucket_limit(limits[size_t(i)]);
    h->add_bucket(counts[size_t(i)]);
  }
  write_event(e.SerializeAsString());
}

void TensorBoardWriter::write_session_start(int64_t step) {
  auto e = event_at(step);
  e.mutable_session_log()->set_status(tb::SessionLog::START);
  write_event(e.SerializeAsString());
}

}  // namespace mpirl::tracking
