// The linear-recurrent cores: step mode applies one step of the recurrence, sequence mode runs
// the whole [T, B] batch as one reset-aware scan.
#include <cmath>

#include "kernels/scan.h"
#include "models/cores.h"

namespace mpirl::models {
namespace {

torch::Tensor complex_matmul_real(const torch::Tensor& x, const torch::Tensor& w_re, const torch::Tensor& w_im) {
  return torch::complex(torch::matmul(x, w_re.t()), torch::matmul(x, w_im.t()));
}

// Re(C h) for complex h [..., N] and C = c_re + i c_im [H, N].
torch::Tensor real_readout(const torch::Tensor& h, const torch::Tensor& c_re, const torch::Tensor& c_im) {
  return torch::matmul(torch::real(h), c_re.t()) - torch::matmul(torch::imag(h), c_im.t());
}

}  // namespace

torch::Tensor LinearRecurrentCore::to_state(const torch::Tensor& h) const {
  if (!complex_state()) return h;
  return torch::view_as_real(h).reshape({h.size(0), -1});
}

torch::Tensor LinearRecurrentCore::from_state(const torch::Tensor& s) const {
  if (!complex_state()) return s;
  return torch::view_as_complex(s.reshape({s.size(0), -1, 2}).contiguous());
}

std::pair<torch::Tensor, torch::Tensor> LinearRecurrentCore::step(const torch::Tensor& x, const torch::Tensor& state,
                                                                  const torch::Tensor& is_init) {
  auto d = drive(x);
  auto h = d.lambda * keep(is_init) * from_state(state) + d.u;
  return {readout(h, x), to_state(h)};
}

std::pair<torch::Tensor, torch::Tensor> LinearRecurrentCore::sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                                      const torch::Tensor& is_init) {
  auto d = drive(x);
  auto a = (d.lambda * keep(is_init)).expand_as(d.u).contiguous();
  auto h = kernels::linear_scan(a, d.u.contiguous(), from_state(state0));
  return {readout(h, x), to_state(h[h.size(0) - 1])};
}

// ---- LRU and SSM ----
void DiagonalComplexCore::init_io(int64_t input, double b_scale) {
  const double cs = 1.0 / std::sqrt(double(N_));
  b_re_ = register_parameter("b_re", torch::randn({N_, input}) * b_scale);
  b_im_ = register_parameter("b_im", torch::randn({N_, input}) * b_scale);
  c_re_ = register_parameter("c_re", torch::randn({H_, N_}) * cs);
  c_im_ = register_parameter("c_im", torch::randn({H_, N_}) * cs);
  skip_ = register_module("skip", torch::nn::Linear(input, H_));
}

LinearRecurrentCore::Drive DiagonalComplexCore::drive(const torch::Tensor& x) {
  auto l = lambda();
  return {l, complex_matmul_real(x, b_re_, b_im_) * gain(l)};
}

torch::Tensor DiagonalComplexCore::readout(const torch::Tensor& h, const torch::Tensor& x) {
  return torch::gelu(real_readout(h, c_re_, c_im_) + skip_(x));
}

LruCore::LruCore(const CoreOptions& o, double r_min, double r_max, double max_phase) : DiagonalComplexCore(o) {
  auto u1 = torch::rand({N_}), u2 = torch::rand({N_});
  // |lambda|^2 uniform in [r_min^2, r_max^2] (ring initialisation).
  auto nu = -0.5 * torch::log(u1 * (r_max * r_max - r_min * r_min) + r_min * r_min);
  auto theta = (u2 * max_phase).clamp_min(1e-4);
  nu_log_ = register_parameter("nu_log", torch::log(nu));
  theta_log_ = register_parameter("theta_log", torch::log(theta));
  auto mod = torch::exp(-nu);
  gamma_log_ = register_parameter("gamma_log", 0.5 * torch::log(1 - mod * mod));
  init_io(o.input, 1.0 / std::sqrt(2.0 * double(o.input)));
}

torch::Tensor LruCore::lambda() { return torch::exp(torch::complex(-torch::exp(nu_log_), torch::exp(theta_log_))); }

SsmCore::SsmCore(const CoreOptions& o) : DiagonalComplexCore(o) {
  log_neg_re_ = register_parameter("log_neg_re", torch::full({N_}, std::log(0.5)));
  im_ = register_parameter("im", M_PI * torch::arange(N_).to(torch::kFloat32));
  log_dt_ = register_parameter("log_dt", torch::rand({N_}) * (std::log(0.1) - std::log(0.001)) + std::log(0.001));
  init_io(o.input, 1.0 / std::sqrt(double(o.input)));
}

// ---- minGRU ----
MinGruCore::MinGruCore(const CoreOptions& o) : H_(o.hidden) {
  z_ = register_module("z", torch::nn::Linear(o.input, H_));
  h_ = register_module("h", torch::nn::Linear(o.input, H_));
}

LinearRecurrentCore::Drive MinGruCore::drive(const torch::Tensor& x) {
  auto z = torch::sigmoid(z_(x));
  return {1 - z, z * h_(x)};
}

// ---- FFM ----
FfmCore::FfmCore(const CoreOptions& o) : H_(o.hidden), M_(o.state), C_(o.ffm_context) {
  // Decays exp(-alpha) spread over [0.3, 0.99]; frequencies over [0, pi/2].
  alpha_ = register_parameter("alpha", -torch::log(torch::linspace(0.3, 0.99, M_)));
  omega_ = register_parameter("omega", torch::linspace(0.0, M_PI / 2, C_));
  pre_ = register_module("pre", torch::nn::Linear(o.input, M_));
  gate_in_ = register_module("gate_in", torch::nn::Linear(o.input, M_));
  gate_out_ = register_module("gate_out", torch::nn::Linear(o.input, H_));
  mix_ = register_module("mix", torch::nn::Linear(2 * M_ * C_, H_));
  skip_ = register_module("skip", torch::nn::Linear(o.input, H_));
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({H_})));
}

LinearRecurrentCore::Drive FfmCore::drive(const torch::Tensor& x) {
  auto gamma = torch::exp(torch::complex(-alpha_.abs().unsqueeze(1).expand({M_, C_}),
                                         omega_.unsqueeze(0).expand({M_, C_})))
                   .reshape({M_ * C_});
  auto u = pre_(x) * torch::sigmoid(gate_in_(x));  // [..., M]
  auto shape = u.sizes().vec();
  shape.back() = M_ * C_;
  auto ur = u.unsqueeze(-1).expand([&] {
                             auto s = u.sizes().vec();
                             s.push_back(C_);
                             return s;
                           }())
                .reshape(shape);
  return {gamma, torch::complex(ur, torch::zeros_like(ur))};
}

torch::Tensor FfmCore::readout(const torch::Tensor& h, const torch::Tensor& x) {
  auto z = norm_(mix_(torch::cat({torch::real(h), torch::imag(h)}, -1)));
  auto g = torch::sigmoid(gate_out_(x));
  return z * g + skip_(x) * (1 - g);
}

// ---- factory ----
std::shared_ptr<CoreImpl> make_core(const CoreOptions& o) {
  if (o.kind == "none") return nullptr;
  if (o.kind == "gru") return std::make_shared<GruCore>(o);
  if (o.kind == "lstm") return std::make_shared<LstmCore>(o);
  if (o.kind == "lru") return std::make_shared<LruCore>(o);
  if (o.kind == "ssm") return std::make_shared<SsmCore>(o);
  if (o.kind == "mingru") return std::make_shared<MinGruCore>(o);
  if (o.kind == "ffm") return std::make_shared<FfmCore>(o);
  throw std::invalid_argument("unknown recurrent core '" + o.kind + "'");
}

std::vector<std::string> core_kinds() { return {"gru", "lstm", "lru", "ssm", "mingru", "ffm"}; }

int64_t core_state_size(const CoreOptions& o) {
  if (o.kind == "none") return 0;
  if (o.kind == "gru" || o.kind == "mingru") return o.hidden;
  if (o.kind == "lstm") return 2 * o.hidden;
  if (o.kind == "lru" || o.kind == "ssm") return 2 * o.state;
  if (o.kind == "ffm") return 2 * o.state * o.ffm_context;
  throw std::invalid_argument("unknown recurrent core '" + o.kind + "'");
}

}  // namespace mpirl::models
