// `mpirl replay inspect FILE`: checks a dump and prints what it holds (no LibTorch: the sanitizer
// build fuzzes it, tests/fuzz/fuzz_dump.cpp).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "buffer/hdf5_dump.h"
#include "buffer/replay.h"
#include "core/error.h"

namespace mpirl::buffer {
namespace {

// The dataset `name`, checked against the header: `items` rows of `per_item` elements of `dtype`
// (the attributes are outside the CRC: a raised items or rollout_len must not read past the data).
const DumpArray& find(const std::vector<DumpArray>& a, const char* name, wire::DType dtype, int64_t items,
                      const std::vector<int64_t>& per_item) {
  for (auto& x : a) {
    if (x.name != name) continue;
    std::vector<int64_t> want{items};
    want.insert(want.end(), per_item.begin(), per_item.end());
    if (x.dtype != dtype || x.shape != want)
      throw Error(fmt::format("dataset /items/{} is {} [{}], but the header says {} [{}] (items, rollout_len)", name,
                              wire::dtype_name(x.dtype), fmt::join(x.shape, ", "), wire::dtype_name(dtype),
                              fmt::join(want, ", ")));
    return x;
  }
  throw Error(fmt::format("dataset /items/{} missing", name));
}

template <typename T>
const T* as(const DumpArray& a) {
  return reinterpret_cast<const T*>(a.data.data());
}

}  // namespace

int replay_inspect_main(const std::string& path) {
  try {
    auto h = read_dump_header(path);
    uint32_t crc = 0;
    auto arrays = read_dump_items(path, &crc);
    if (crc != h.checksum)
      throw Error(fmt::format("replay dump '{}' is corrupt: its data gives CRC-32 {:08x}, the file says {:08x}", path,
                              crc, h.checksum));
    const int64_t n = h.items, T = h.rollout_len;
    fmt::print("replay dump {}: schema {}, complete, {} items, CRC-32 {:08x} verified\n", path, h.schema_version, n, crc);
    fmt::print("env {}, rollout_len {}, obs_shape [{}], recurrent state {} floats, capacity {}, selector {}\n", h.env_id,
               T, fmt::join(h.obs_shape, ","), h.state_size, h.capacity, h.selector);
    fmt::print("fields (/items):\n");
    for (auto& a : arrays)
      fmt::print("  {:<14} {:<8} [{}]\n", a.name, wire::dtype_name(a.dtype), fmt::join(a.shape, ", "));
    fmt::print("counters at dump time:");
    for (auto& [k, v] : h.counters) fmt::print(" {}={}", k, v);
    fmt::print("\n");
    if (n == 0) return 0;
    if (T < 1) throw Error(fmt::format("the header says rollout_len {}", T));
    using wire::DType;
    const auto* init = as<uint8_t>(find(arrays, "is_init", DType::U8, n, {T + 1}));
    const auto* rew = as<float>(find(arrays, "reward", DType::F32, n, {T}));
    const auto* term = as<uint8_t>(find(arrays, "terminated", DType::U8, n, {T}));
    const auto* trunc = as<uint8_t>(find(arrays, "truncated", DType::U8, n, {T}));
    int64_t n_term = 0, n_trunc = 0;
    std::vector<double> whole;
    double reward_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      bool started = false;
      double ret = 0;
      for (int64_t t = 0; t < T; ++t) {
        if (init[i * (T + 1) + t]) started = true, ret = 0;
        ret += rew[i * T + t];
        reward_sum += rew[i * T + t];
        bool te = term[i * T + t], tr = trunc[i * T + t];
        n_term += te;
        n_trunc += tr;
        if (te || tr) {
          if (started) whole.push_back(ret);
          started = false;
        }
      }
    }
    fmt::print("steps {}: mean reward {:.4f}; episode ends {} (terminated {}, truncated {})\n", n * T,
               reward_sum / double(n * T), n_term + n_trunc, n_term, n_trunc);
    if (!whole.empty()) {
      double m = 0;
      for (double r : whole) m += r;
      m /= double(whole.size());
      fmt::print("episodes wholly inside one item: {}, return mean {:.3f} min {:.3f} max {:.3f}\n", whole.size(), m,
                 *std::min_element(whole.begin(), whole.end()), *std::max_element(whole.begin(), whole.end()));
    }
    const auto* pr = as<double>(find(arrays, "priority", DType::F64, n, {}));
    const auto* ts = as<int64_t>(find(arrays, "times_sampled", DType::I64, n, {}));
    const auto* ver = as<int64_t>(find(arrays, "version", DType::I64, n, {}));
    const auto* act = as<int32_t>(find(arrays, "actor", DType::I32, n, {}));
    double pmin = pr[0], pmax = pr[0], psum = 0, tsum = 0;
    int64_t never = 0, tmax = 0, vmin = ver[0], vmax = ver[0];
    std::set<int32_t> actors;
    for (int64_t i = 0; i < n; ++i) {
      pmin = std::min(pmin, pr[i]);
      pmax = std::max(pmax, pr[i]);
      psum += pr[i];
      tsum += double(ts[i]);
      tmax = std::max(tmax, ts[i]);
      never += ts[i] == 0;
      vmin = std::min(vmin, ver[i]);
      vmax = std::max(vmax, ver[i]);
      actors.insert(act[i]);
    }
    fmt::print("priorities: min {:.4g} mean {:.4g} max {:.4g}; times sampled: mean {:.2f} max {}, never sampled {}\n",
               pmin, psum / double(n), pmax, tsum / double(n), tmax, never);
    fmt::print("policy versions {}..{}; actor ranks {}\n", vmin, vmax, fmt::join(actors, ","));
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mpirl replay inspect: {}\n", e.what());
    return 2;
  }
}

}  // namespace mpirl::buffer
