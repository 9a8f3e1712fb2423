#pragma once
// Array checks and copies between Python and the rollout buffers, for py_vector_env.cpp only (it
// exposes pybind11, so it stays out of envs/python/py_vector_env.h, the folder's interface).
#include <pybind11/numpy.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include <fmt/ranges.h>

#include "core/error.h"
#include "envs/env.h"

namespace mpirl::envs::detail {
namespace py = pybind11;

// Copies an observation array of shape [E, obs...] (uint8 for uint8 specs; float32, or converted
// from another float dtype, for float specs) into rows of `out` (stride in elements); `only` (if
// set) selects the rows to copy. The buffer protocol gives one memcpy per row. Returns the first
// copied row that is not finite (float specs), or -1.
inline int copy_obs(const py::handle& obj, const EnvSpec& s, int E, void* out, int64_t stride, const uint8_t* only,
                    const std::function<std::string()>& where) {
  py::array a;
  if (s.obs_uint8) {
    a = py::array::ensure(obj);
    if (!a) PyErr_Clear();
    if (!a || a.dtype().kind() != 'u' || a.dtype().itemsize() != 1)
      throw Error(fmt::format("{}: observations of type {}, expected a uint8 array (the observation space's dtype)",
                              where(), a ? std::string(py::str(a.dtype())) : std::string(py::str(py::type::handle_of(obj)))));
    a = py::array_t<uint8_t, py::array::c_style>::ensure(a);
  } else {
    a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
    if (!a) {
      PyErr_Clear();
      throw Error(fmt::format("{}: observations of type {}, expected a float array", where(),
                              std::string(py::str(py::type::handle_of(obj)))));
    }
  }
  const int64_t D = s.obs_size();
  // Rows of the spec's shape; [H, W] images (spec [1, H, W]) and float arrays of rank 2 (spec
  // flattened) have the same elements in the same order.
  int64_t per_row = 1;
  bool same_dims = size_t(a.ndim()) == s.obs_shape.size() + 1;
  for (py::ssize_t i = 1; i < a.ndim(); ++i) {
    per_row *= a.shape(i);
    if (same_dims && a.shape(i) != s.obs_shape[size_t(i - 1)]) same_dims = false;
  }
  const bool reshaped = size_t(a.ndim()) != s.obs_shape.size() + 1 && per_row == D;
  if (a.ndim() < 2 || a.shape(0) != E || !(same_dims || reshaped))
    throw Error(fmt::format("{}: observations of shape {}, expected ({}, {}) from the observation space", where(),
                            std::string(py::str(obj.attr("shape"))), E, fmt::join(s.obs_shape, ", ")));
  const size_t row = size_t(s.obs_bytes());
  const auto* src = static_cast<const uint8_t*>(a.data());
  auto* dst = static_cast<uint8_t*>(out);
  int bad = -1;
  for (int e = 0; e < E; ++e) {
    if (only && !only[e]) continue;
    std::memcpy(dst + size_t(e) * size_t(stride) * size_t(s.obs_elem_bytes()), src + size_t(e) * row, row);
    if (s.obs_uint8 || bad >= 0) continue;
    const float* f = reinterpret_cast<const float*>(src + size_t(e) * row);
    for (int64_t i = 0; i < D; ++i)
      if (!std::isfinite(f[i])) {
        bad = e;
        break;
      }
  }
  return bad;
}

template <class T>
inline py::array_t<T, py::array::c_style | py::array::forcecast> vec(const py::handle& obj, int E, const char* what,
                                                                      const std::function<std::string()>& where) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!a) PyErr_Clear();
  if (!a || a.ndim() != 1 || a.shape(0) != E)
    throw Error(fmt::format("{}: {} is {}, expected an array of shape ({},)", where(), what,
                            std::string(py::repr(obj)).substr(0, 200), E));
  return a;
}

}  // namespace mpirl::envs::detail
