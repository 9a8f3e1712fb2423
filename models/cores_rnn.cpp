// GRU and LSTM cores: a cell applied step by step, state zeroed where is_init.
#include "models/cores.h"

namespace mpirl::models {

GruCore::GruCore(const CoreOptions& o) : H_(o.hidden) {
  cell_ = register_module("cell", torch::nn::GRUCell(o.input, o.hidden));
}

std::pair<torch::Tensor, torch::Tensor> GruCore::step(const torch::Tensor& x, const torch::Tensor& state,
                                                      const torch::Tensor& is_init) {
  auto h = cell_(x, state * keep(is_init));
  return {h, h};
}

std::pair<torch::Tensor, torch::Tensor> GruCore::sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                          const torch::Tensor& is_init) {
  std::vector<torch::Tensor> ys;
  auto h = state0;
  for (int64_t t = 0; t < x.size(0); ++t) {
    h = step(x[t], h, is_init[t]).second;
    ys.push_back(h);
  }
  return {torch::stack(ys), h};
}

LstmCore::LstmCore(const CoreOptions& o) : H_(o.hidden) {
  cell_ = register_module("cell", torch::nn::LSTMCell(o.input, o.hidden));
}

std::pair<torch::Tensor, torch::Tensor> LstmCore::step(const torch::Tensor& x, const torch::Tensor& state,
                                                       const torch::Tensor& is_init) {
  auto s = state * keep(is_init);
  auto [h, c] = cell_(x, std::make_tuple(s.slice(1, 0, H_), s.slice(1, H_, 2 * H_)));
  return {h, torch::cat({h, c}, 1)};
}

std::pair<torch::Tensor, torch::Tensor> LstmCore::sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                           const torch::Tensor& is_init) {
  std::vector<torch::Tensor> ys;
  auto s = state0;
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto [y, next] = step(x[t], s, is_init[t]);
    ys.push_back(y);
    s = next;
  }
  return {torch::stack(ys), s};
}

}  // namespace mpirl::models
