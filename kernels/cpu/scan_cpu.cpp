#include "kernels/cpu/scan_cpu.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels/scan_math.h"

namespace mpirl::kernels::cpu {
namespace {

// Channel blocks handed to one thread: wide enough to stream rows, narrow enough to split.
int64_t grain(int64_t N) { return std::max<int64_t>(256, N / (4 * std::max(1, at::get_num_threads()))); }

template <typename S>
void forward_block(const ScanForwardParams& p, int64_t j0, int64_t j1) {
  const int64_t T = p.T, N = p.N;
  const S* __restrict a = static_cast<const S*>(p.a);
  const S* __restrict b = static_cast<const S*>(p.b);
  const S* __restrict h0 = static_cast<const S*>(p.h0);
  S* __restrict h = static_cast<S*>(p.h);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = p.reverse ? T - 1 - s : s;
    const S* at = a + t * N;
    const S* bt = b + t * N;
    S* ht = h + t * N;
    if (s == 0) {
      for (int64_t j = j0; j < j1; ++j) ht[j] = h0 ? at[j] * h0[j] + bt[j] : bt[j];
    } else {
      const S* hp = h + (p.reverse ? t + 1 : t - 1) * N;
      for (int64_t j = j0; j < j1; ++j) ht[j] = at[j] * hp[j] + bt[j];
    }
  }
}

template <typename S>
void backward_block(const ScanBackwardParams& p, int64_t j0, int64_t j1) {
  const int64_t T = p.T, N = p.N;
  const S* __restrict a = static_cast<const S*>(p.a);
  const S* __restrict h = static_cast<const S*>(p.h);
  const S* __restrict h0 = static_cast<const S*>(p.h0);
  const S* __restrict gh = static_cast<const S*>(p.grad_h);
  S* __restrict ga = static_cast<S*>(p.grad_a);
  S* __restrict gb = static_cast<S*>(p.grad_b);
  const int64_t dir = p.reverse ? -1 : 1;  // forward recurrence direction; backward runs against it
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = p.reverse ? s : T - 1 - s;
    S* g = gb + t * N;
    const S* ght = gh + t * N;
    if (s == 0) {
      for (int64_t j = j0; j < j1; ++j) g[j] = ght[j];
    } else {
      const int64_t tn = t + dir;  // next step of the forward recurrence, already done here
      const S* an = a + tn * N;
      const S* gn = gb + tn * N;
      for (int64_t j = j0; j < j1; ++j) g[j] = conj(an[j]) * gn[j] + ght[j];
    }
    S* gat = ga + t * N;
    if (s < T - 1) {
      const S* hp = h + (t - dir) * N;
      for (int64_t j = j0; j < j1; ++j) gat[j] = g[j] * conj(hp[j]);
    } else if (h0) {
      for (int64_t j = j0; j < j1; ++j) gat[j] = g[j] * conj(h0[j]);
    } else {
      for (int64_t j = j0; j < j1; ++j) gat[j] = ScalarOps<S>::zero();
    }
  }
}

template <typename P, typename F>
void dispatch(const P& p, F&& f) {
  switch (p.dtype) {
    case ScanDType::F32: return f(float{});
    case ScanDType::F64: return f(double{});
    case ScanDType::C64: return f(Cx<float>{});
    case ScanDType::C128: return f(Cx<double>{});
  }
}

}  // namespace

void scan_forward(const ScanForwardParams& p) {
  if (p.T == 0 || p.N == 0) return;
  dispatch(p, [&](auto tag) {
    using S = decltype(tag);
    at::parallel_for(0, p.N, grain(p.N), [&](int64_t j0, int64_t j1) { forward_block<S>(p, j0, j1); });
  });
}

void scan_backward(const ScanBackwardParams& p) {
  if (p.T == 0 || p.N == 0) return;
  dispatch(p, [&](auto tag) {
    using S = decltype(tag);
    at::parallel_for(0, p.N, grain(p.N), [&](int64_t j0, int64_t j1) { backward_block<S>(p, j0, j1); });
  });
}

}  // namespace mpirl::kernels::cpu
