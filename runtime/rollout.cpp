#include "runtime/rollout.h"

#include <cstring>
#include <string>

#include "runtime/error.h"

namespace mpirl {

using wire::DType;

SeqLayout::SeqLayout(const envs::EnvSpec& spec, int64_t T, int64_t state_size) : T_(T), S_(state_size) {
  std::vector<int64_t> obs{T + 1};
  obs.insert(obs.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  fields_ = {
      {"obs", DType::F32, obs},
      {"is_init", DType::U8, {T + 1}},
      spec.discrete ? SeqField{"action", DType::I64, {T}} : SeqField{"action", DType::F32, {T, spec.action_dim}},
      {"reward", DType::F32, {T}},
      {"terminated", DType::U8, {T}},
      {"truncated", DType::U8, {T}},
      {"logp", DType::F32, {T}},
      {"dist", DType::F32, {T, spec.dist_size()}},
      {"trunc_value", DType::F32, {T}},
      {"version", DType::I64, {}},
      {"actor", DType::I32, {}},
      {"env_index", DType::I32, {}},
  };
  if (S_ > 0) fields_.push_back({"state0", DType::F32, {S_}});
  for (auto& f : fields_) {
    size_t n = 1;
    for (auto d : f.shape) n *= size_t(d);
    f.bytes = n * wire::dtype_size(f.dtype);
  }
}

int SeqLayout::index(const char* name) const {
  for (size_t i = 0; i < fields_.size(); ++i)
    if (std::strcmp(fields_[i].name, name) == 0) return int(i);
  MPIRL_CHECK(false, "no sequence field {}", name);
}

size_t SeqLayout::bytes_per_sequence() const {
  size_t n = 0;
  for (auto& f : fields_) n += f.bytes;
  return n;
}

std::vector<wire::ArrayDesc> SeqLayout::arrays(int64_t n, bool with_stats, int64_t m) const {
  std::vector<wire::ArrayDesc> out;
  for (auto& f : fields_) {
    std::vector<int64_t> shape{n};
    shape.insert(shape.end(), f.shape.begin(), f.shape.end());
    out.push_back({f.name, f.dtype, shape});
  }
  if (with_stats) {
    out.push_back({"episode_return", DType::F32, {m}});
    out.push_back({"episode_length", DType::I32, {m}});
  }
  return out;
}

size_t SeqLayout::field_offset(size_t f, int64_t n) const {
  size_t off = 0;
  for (size_t i = 0; i < f; ++i) off = wire::align_up(off + fields_[i].bytes * size_t(n));
  return off;
}

int64_t SeqLayout::check(const wire::Message& msg, int sender) const {
  const auto& a = msg.env.arrays;
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("{} from rank {} does not match the run's sequence layout (T={}): {}",
                            wire::kind_name(msg.env.kind), sender, T_, what));
  };
  if (a.size() < fields_.size()) bad(fmt::format("{} arrays, expected at least {}", a.size(), fields_.size()));
  int64_t n = a[0].shape.empty() ? -1 : a[0].shape[0];
  for (size_t i = 0; i < fields_.size(); ++i) {
    const auto& f = fields_[i];
    std::vector<int64_t> want{n};
    want.insert(want.end(), f.shape.begin(), f.shape.end());
    if (a[i].name != f.name || a[i].dtype != f.dtype || a[i].shape != want)
      bad(fmt::format("array {} is '{}' {} [{}], expected '{}' {} [{}]", i, a[i].name, wire::dtype_name(a[i].dtype),
                      fmt::join(a[i].shape, ","), f.name, wire::dtype_name(f.dtype), fmt::join(want, ",")));
  }
  return n;
}

void SeqLayout::copy_sequence(const char* src, int64_t n_src, int64_t i, char* dst, int64_t n_dst, int64_t j) const {
  size_t so = 0, d = 0;
  for (auto& f : fields_) {
    std::memcpy(dst + d + f.bytes * size_t(j), src + so + f.bytes * size_t(i), f.bytes);
    so = wire::align_up(so + f.bytes * size_t(n_src));
    d = wire::align_up(d + f.bytes * size_t(n_dst));
  }
}

}  // namespace mpirl
