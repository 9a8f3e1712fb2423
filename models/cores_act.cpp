// The cores' actor step (CoreImpl::act): the same function as step(), with the matmuls as addmm
// into preallocated buffers, the transcendental functions (sigmoid, tanh, GELU) as torch's
// vectorised in-place kernels on those buffers, and the rest (resets, the recurrence, LayerNorm) as
// plain loops over the rows, so no tensor is allocated per step. The state is updated in place;
// complex states are interleaved (re, im) pairs as in LinearRecurrentCore.
#include <cmath>

#include "models/cores.h"

namespace mpirl::models {
namespace {

torch::Tensor buffer(int64_t B, int64_t n) { return torch::empty({B, n}); }

// Checks the shapes (the buffers too: the loops write them by raw pointer) and returns B; rows
// whose init is set get a zero state.
int64_t begin_act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init, int64_t S,
                  const CoreActBuffers& buf) {
  const int64_t B = x.size(0);
  for (const auto& t : buf.t)
    TORCH_CHECK(t.is_contiguous() && t.size(0) == B, "CoreImpl::act: buffers for ", t.size(0), " rows, called with ", B);
  TORCH_CHECK(state.device().is_cpu() && state.scalar_type() == torch::kFloat32 && state.is_contiguous() &&
                  state.dim() == 2 && state.size(0) == B && state.size(1) == S,
              "CoreImpl::act: the state must be a contiguous CPU float32 [", B, ", ", S, "], it is ", state.sizes(),
              " on ", state.device());
  TORCH_CHECK(init.is_contiguous() && init.scalar_type() == torch::kFloat32 && init.numel() == B,
              "CoreImpl::act: init must be ", B, " contiguous float32 flags");
  float* s = state.data_ptr<float>();
  const float* r = init.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    if (r[b] != 0.0f) std::fill_n(s + b * S, S, 0.0f);
  return B;
}

const float* ptr(const torch::Tensor& t) { return t.data_ptr<float>(); }

}  // namespace

// ---- GRU (torch's GRUCell: gates r, z, n) ----
CoreActBuffers GruCore::act_buffers(int64_t B) const { return {{buffer(B, 3 * H_), buffer(B, 3 * H_)}, {}}; }

// gi = W_i x + b_i, gh = W_h h + b_h; r, z = sigmoid(gi + gh) (first 2H columns), n = tanh(gi_n + r gh_n).

torch::Tensor GruCore::act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                           CoreActBuffers& buf) {
  const int64_t B = begin_act(x, state, init, H_, buf), H = H_;
  at::addmm_out(buf.t[0], cell_->bias_ih, x, cell_->weight_ih.t());
  at::addmm_out(buf.t[1], cell_->bias_hh, state, cell_->weight_hh.t());
  buf.t[0].narrow(1, 0, 2 * H).add_(buf.t[1].narrow(1, 0, 2 * H)).sigmoid_();
  float* g = buf.t[0].data_ptr<float>();
  const float* gh = ptr(buf.t[1]);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = b * 3 * H; j < b * 3 * H + H; ++j) g[j + 2 * H] += g[j] * gh[j + 2 * H];
  buf.t[0].narrow(1, 2 * H, H).tanh_();
  float* h = state.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b, g += 3 * H, h += H)
    for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - g[H + j]) * g[2 * H + j] + g[H + j] * h[j];
  return state;
}

// ---- LSTM (torch's LSTMCell: gates i, f, g, o; state h ++ c) ----
CoreActBuffers LstmCore::act_buffers(int64_t B) const { return {{buffer(B, 4 * H_), buffer(B, H_)}, {}}; }

torch::Tensor LstmCore::act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                            CoreActBuffers& buf) {
  const int64_t B = begin_act(x, state, init, 2 * H_, buf), H = H_;
  const torch::Tensor h_in = state.narrow(1, 0, H);
  at::addmm_out(buf.t[0], cell_->bias_ih, x, cell_->weight_ih.t());
  buf.t[0].addmm_(h_in, cell_->weight_hh.t()).add_(cell_->bias_hh);
  auto& gates = buf.t[0];
  gates.narrow(1, 0, 2 * H).sigmoid_();  // i, f
  gates.narrow(1, 2 * H, H).tanh_();     // g
  gates.narrow(1, 3 * H, H).sigmoid_();  // o
  const float* g = ptr(gates);
  float *s = state.data_ptr<float>(), *tc = buf.t[1].data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) {
      const float* gb = g + b * 4 * H;
      float& c = s[b * 2 * H + H + j];
      c = gb[H + j] * c + gb[j] * gb[2 * H + j];
      tc[b * H + j] = c;
    }
  buf.t[1].tanh_();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < H; ++j) s[b * 2 * H + j] = g[b * 4 * H + 3 * H + j] * tc[b * H + j];
  return h_in;
}

// ---- LRU and SSM: h = lambda * h + gain * (B x), y = GELU(Re(C h) + W x) ----
void LruCore::coefficients(float* lre, float* lim, float* gre, float* gim) const {
  const float *nu = ptr(nu_log_), *th = ptr(theta_log_), *ga = ptr(gamma_log_);
  for (int64_t n = 0; n < N_; ++n) {  // exp(-exp(nu) + i exp(theta)); gain exp(gamma_log), real
    const double mod = std::exp(-std::exp(double(nu[n]))), phase = std::exp(double(th[n]));
    lre[n] = float(mod * std::cos(phase));
    lim[n] = float(mod * std::sin(phase));
    gre[n] = float(std::exp(double(ga[n])));
    gim[n] = 0.0f;
  }
}

void SsmCore::coefficients(float* lre, float* lim, float* gre, float* gim) const {
  const float *a = ptr(log_neg_re_), *w = ptr(im_), *dt = ptr(log_dt_);
  for (int64_t n = 0; n < N_; ++n) {  // Lambda = -exp(a) + i w; lambda = exp(Lambda dt); gain (lambda - 1) / Lambda
    const double cr = -std::exp(double(a[n])), ci = double(w[n]), d = std::exp(double(dt[n]));
    const double mod = std::exp(cr * d), lr = mod * std::cos(ci * d), li = mod * std::sin(ci * d);
    const double den = cr * cr + ci * ci, pr = lr - 1.0;
    lre[n] = float(lr);
    lim[n] = float(li);
    gre[n] = float((pr * cr + li * ci) / den);
    gim[n] = float((li * cr - pr * ci) / den);
  }
}

CoreActBuffers DiagonalComplexCore::act_buffers(int64_t B) const {
  return {{buffer(B, N_), buffer(B, N_), buffer(B, N_), buffer(B, N_), buffer(B, H_), buffer(B, H_)},
          std::vector<float>(size_t(4 * N_))};
}

torch::Tensor DiagonalComplexCore::act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                                       CoreActBuffers& buf) {
  const int64_t B = begin_act(x, state, init, 2 * N_, buf), N = N_;
  float *lre = buf.coef.data(), *lim = lre + N, *gre = lim + N, *gim = gre + N;
  coefficients(lre, lim, gre, gim);
  auto &bx_re = buf.t[0], &bx_im = buf.t[1], &h_re = buf.t[2], &h_im = buf.t[3], &y = buf.t[4];
  at::mm_out(bx_re, x, b_re_.t());
  at::mm_out(bx_im, x, b_im_.t());
  const float *ur = ptr(bx_re), *ui = ptr(bx_im);
  float *s = state.data_ptr<float>(), *hr = h_re.data_ptr<float>(), *hi = h_im.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b, ur += N, ui += N, s += 2 * N, hr += N, hi += N)
    for (int64_t n = 0; n < N; ++n) {
      const float pr = s[2 * n], pi = s[2 * n + 1];
      const float r = lre[n] * pr - lim[n] * pi + (ur[n] * gre[n] - ui[n] * gim[n]);
      const float i = lre[n] * pi + lim[n] * pr + (ur[n] * gim[n] + ui[n] * gre[n]);
      s[2 * n] = hr[n] = r;
      s[2 * n + 1] = hi[n] = i;
    }
  at::addmm_out(y, skip_->bias, x, skip_->weight.t());
  y.addmm_(h_re, c_re_.t());
  y.addmm_(h_im, c_im_.t(), /*beta=*/1, /*alpha=*/-1);
  // GELU(v) = v (1 + erf(v / sqrt 2)) / 2, with erf_ in place (at::gelu_ allocates a temporary)
  float *v = y.data_ptr<float>(), *e = buf.t[5].data_ptr<float>();
  const int64_t n = y.numel();
  for (int64_t k = 0; k < n; ++k) e[k] = v[k] * float(M_SQRT1_2);
  buf.t[5].erf_();
  for (int64_t k = 0; k < n; ++k) v[k] = 0.5f * v[k] * (1.0f + e[k]);
  return y;
}

// ---- minGRU: h = (1 - z) h + z h~ ----
CoreActBuffers MinGruCore::act_buffers(int64_t B) const { return {{buffer(B, H_), buffer(B, H_)}, {}}; }

torch::Tensor MinGruCore::act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                              CoreActBuffers& buf) {
  const int64_t B = begin_act(x, state, init, H_, buf);
  at::addmm_out(buf.t[0], z_->bias, x, z_->weight.t());
  at::addmm_out(buf.t[1], h_->bias, x, h_->weight.t());
  const float *z = ptr(buf.t[0].sigmoid_()), *hc = ptr(buf.t[1]);
  float* h = state.data_ptr<float>();
  for (int64_t k = 0, n = B * H_; k < n; ++k) h[k] = (1.0f - z[k]) * h[k] + z[k] * hc[k];
  return state;
}

// ---- FFM: S = gamma * S + u (u real, repeated over the C frequencies), y = LN(mix) g + skip (1 - g) ----
CoreActBuffers FfmCore::act_buffers(int64_t B) const {
  return {{buffer(B, M_), buffer(B, M_), buffer(B, 2 * M_ * C_), buffer(B, H_), buffer(B, H_), buffer(B, H_)},
          std::vector<float>(size_t(2 * M_ * C_))};
}

torch::Tensor FfmCore::act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                           CoreActBuffers& buf) {
  const int64_t MC = M_ * C_, B = begin_act(x, state, init, 2 * MC, buf), H = H_;
  float *gr = buf.coef.data(), *gi = gr + MC;
  const float *al = ptr(alpha_), *om = ptr(omega_);
  for (int64_t j = 0; j < M_; ++j)
    for (int64_t k = 0; k < C_; ++k) {  // gamma_jk = exp(-|alpha_j| + i omega_k)
      const double mod = std::exp(-std::abs(double(al[j])));
      gr[j * C_ + k] = float(mod * std::cos(double(om[k])));
      gi[j * C_ + k] = float(mod * std::sin(double(om[k])));
    }
  auto &pre = buf.t[0], &gin = buf.t[1], &cat = buf.t[2], &mix = buf.t[3], &gout = buf.t[4], &y = buf.t[5];
  at::addmm_out(pre, pre_->bias, x, pre_->weight.t());
  at::addmm_out(gin, gate_in_->bias, x, gate_in_->weight.t()).sigmoid_();
  const float *p = ptr(pre), *q = ptr(gin);
  float *s = state.data_ptr<float>(), *c = cat.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b, p += M_, q += M_, s += 2 * MC, c += 2 * MC)
    for (int64_t j = 0; j < M_; ++j) {
      const float u = p[j] * q[j];
      for (int64_t k = j * C_; k < (j + 1) * C_; ++k) {
        const float r = gr[k] * s[2 * k] - gi[k] * s[2 * k + 1] + u, i = gr[k] * s[2 * k + 1] + gi[k] * s[2 * k];
        s[2 * k] = c[k] = r;  // cat = [Re S, Im S]
        s[2 * k + 1] = c[MC + k] = i;
      }
    }
  at::addmm_out(mix, mix_->bias, cat, mix_->weight.t());
  at::addmm_out(gout, gate_out_->bias, x, gate_out_->weight.t()).sigmoid_();
  at::addmm_out(y, skip_->bias, x, skip_->weight.t());
  const float eps = float(norm_->options.eps()), *w = ptr(norm_->weight), *nb = ptr(norm_->bias);
  const float *m = ptr(mix), *g = ptr(gout);
  float* out = y.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b, m += H, g += H, out += H) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < H; ++j) mean += m[j];
    mean /= double(H);
    for (int64_t j = 0; j < H; ++j) var += (m[j] - mean) * (m[j] - mean);
    const float inv = float(1.0 / std::sqrt(var / double(H) + eps)), mu = float(mean);
    for (int64_t j = 0; j < H; ++j) {
      const float z = (m[j] - mu) * inv * w[j] + nb[j];
      out[j] = z * g[j] + out[j] * (1.0f - g[j]);
    }
  }
  return y;
}

}  // namespace mpirl::models
