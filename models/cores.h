#pragma once
// The concrete cores behind models/core.h (internal to models/).
#include "models/core.h"

namespace mpirl::models {

// 1 where a step continues its episode, 0 where is_init starts a new one: [..., 1], to scale state.
inline torch::Tensor keep(const torch::Tensor& is_init) { return (1 - is_init.to(torch::kFloat32)).unsqueeze(-1); }

class GruCore : public CoreImpl {
 public:
  explicit GruCore(const CoreOptions& o);
  int64_t output_size() const override { return H_; }
  int64_t state_size() const override { return H_; }
  std::pair<torch::Tensor, torch::Tensor> step(const torch::Tensor& x, const torch::Tensor& state,
                                               const torch::Tensor& is_init) override;
  std::pair<torch::Tensor, torch::Tensor> sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                   const torch::Tensor& is_init) override;
  torch::Tensor act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                    CoreActBuffers& buf) override;
  CoreActBuffers act_buffers(int64_t B) const override;

 private:
  int64_t H_;
  torch::nn::GRUCell cell_{nullptr};
};

class LstmCore : public CoreImpl {
 public:
  explicit LstmCore(const CoreOptions& o);
  int64_t output_size() const override { return H_; }
  int64_t state_size() const override { return 2 * H_; }  // h ++ c
  std::pair<torch::Tensor, torch::Tensor> step(const torch::Tensor& x, const torch::Tensor& state,
                                               const torch::Tensor& is_init) override;
  std::pair<torch::Tensor, torch::Tensor> sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                   const torch::Tensor& is_init) override;
  torch::Tensor act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                    CoreActBuffers& buf) override;
  CoreActBuffers act_buffers(int64_t B) const override;

 private:
  int64_t H_;
  torch::nn::LSTMCell cell_{nullptr};
};

// A core whose memory is a diagonal linear recurrence h_t = lambda_t * keep_t * h_{t-1} + u_t:
// subclasses give lambda (per channel or per step), the input u and the readout; this class runs
// step mode directly and sequence mode as one scan.
class LinearRecurrentCore : public CoreImpl {
 public:
  std::pair<torch::Tensor, torch::Tensor> step(const torch::Tensor& x, const torch::Tensor& state,
                                               const torch::Tensor& is_init) override;
  std::pair<torch::Tensor, torch::Tensor> sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                   const torch::Tensor& is_init) override;

 protected:
  struct Drive {
    torch::Tensor lambda;  // broadcastable to u: [N] or [..., N]
    torch::Tensor u;       // [..., N]
  };
  virtual Drive drive(const torch::Tensor& x) = 0;                              // x [..., D]
  virtual torch::Tensor readout(const torch::Tensor& h, const torch::Tensor& x) = 0;  // h [..., N]
  virtual bool complex_state() const = 0;
  torch::Tensor to_state(const torch::Tensor& h) const;                    // [B, N] -> [B, S]
  torch::Tensor from_state(const torch::Tensor& s) const;                  // [B, S] -> [B, N]
};

// A diagonal complex recurrence driven by a complex input map B (N x D) and read out as
// y = GELU(Re(C h) + W x) with C (H x N): what LRU and the S5-style SSM share. Subclasses give
// lambda and the per-channel input gain, and call init_io after registering their own parameters.
class DiagonalComplexCore : public LinearRecurrentCore {
 public:
  int64_t output_size() const override { return H_; }
  int64_t state_size() const override { return 2 * N_; }
  torch::Tensor act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                    CoreActBuffers& buf) override;
  CoreActBuffers act_buffers(int64_t B) const override;

 protected:
  DiagonalComplexCore(const CoreOptions& o) : H_(o.hidden), N_(o.state) {}
  void init_io(int64_t input, double b_scale);
  virtual torch::Tensor lambda() = 0;                           // [N] complex
  virtual torch::Tensor gain(const torch::Tensor& lambda) = 0;  // [N], scales B x
  // lambda and gain per channel as real and imaginary parts, in plain C++ (act's coefficients)
  virtual void coefficients(float* lambda_re, float* lambda_im, float* gain_re, float* gain_im) const = 0;
  Drive drive(const torch::Tensor& x) override;
  torch::Tensor readout(const torch::Tensor& h, const torch::Tensor& x) override;
  bool complex_state() const override { return true; }
  int64_t H_, N_;
  torch::Tensor b_re_, b_im_, c_re_, c_im_;
  torch::nn::Linear skip_{nullptr};
};

// LRU: lambda = exp(-exp(nu) + i exp(theta)) with ring initialisation (|lambda| uniform in
// [r_min, r_max], phase in [0, max_phase]); input normalised by gamma = sqrt(1 - |lambda|^2)
// (learned in log space).
class LruCore : public DiagonalComplexCore {
 public:
  explicit LruCore(const CoreOptions& o, double r_min = 0.4, double r_max = 0.99, double max_phase = M_PI);

 protected:
  torch::Tensor lambda() override;
  torch::Tensor gain(const torch::Tensor&) override { return torch::exp(gamma_log_); }
  void coefficients(float* lambda_re, float* lambda_im, float* gain_re, float* gain_im) const override;
  torch::Tensor nu_log_, theta_log_, gamma_log_;
};

// Diagonal complex SSM in the S5 style: continuous Lambda = -exp(a) + i w, learned step size
// dt = exp(log_dt), zero-order-hold discretisation lambda = exp(Lambda dt), gain (lambda - 1) / Lambda.
class SsmCore : public DiagonalComplexCore {
 public:
  explicit SsmCore(const CoreOptions& o);

 protected:
  torch::Tensor continuous() { return torch::complex(-torch::exp(log_neg_re_), im_); }
  torch::Tensor lambda() override { return torch::exp(continuous() * torch::exp(log_dt_)); }
  torch::Tensor gain(const torch::Tensor& lambda) override { return (lambda - 1) / continuous(); }
  void coefficients(float* lambda_re, float* lambda_im, float* gain_re, float* gain_im) const override;
  torch::Tensor log_neg_re_, im_, log_dt_;
};

// minGRU: z = sigmoid(W_z x), h~ = W_h x, h_t = (1 - z_t) h_{t-1} + z_t h~_t; y = h.
class MinGruCore : public LinearRecurrentCore {
 public:
  explicit MinGruCore(const CoreOptions& o);
  int64_t output_size() const override { return H_; }
  int64_t state_size() const override { return H_; }
  torch::Tensor act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                    CoreActBuffers& buf) override;
  CoreActBuffers act_buffers(int64_t B) const override;

 protected:
  Drive drive(const torch::Tensor& x) override;
  torch::Tensor readout(const torch::Tensor& h, const torch::Tensor& x) override { return h; }
  bool complex_state() const override { return false; }
  int64_t H_;
  torch::nn::Linear z_{nullptr}, h_{nullptr};
};

// FFM: m gated input traces, each aggregated at c frequencies, S_t = gamma * S_{t-1} + u_t with
// gamma_jk = exp(-|alpha_j| + i omega_k); y = LN(W_mix [Re S, Im S]) * g + W_skip x * (1 - g),
// g = sigmoid(W_out x).
class FfmCore : public LinearRecurrentCore {
 public:
  explicit FfmCore(const CoreOptions& o);
  int64_t output_size() const override { return H_; }
  int64_t state_size() const override { return 2 * M_ * C_; }
  torch::Tensor act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                    CoreActBuffers& buf) override;
  CoreActBuffers act_buffers(int64_t B) const override;

 protected:
  Drive drive(const torch::Tensor& x) override;
  torch::Tensor readout(const torch::Tensor& h, const torch::Tensor& x) override;
  bool complex_state() const override { return true; }
  int64_t H_, M_, C_;
  torch::Tensor alpha_, omega_;
  torch::nn::Linear pre_{nullptr}, gate_in_{nullptr}, gate_out_{nullptr}, mix_{nullptr}, skip_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
};

}  // namespace mpirl::models
