#include "models/encoders.h"

#include "core/error.h"

namespace mpirl::models {

std::string resolve_encoder(const std::string& encoder, const std::vector<int64_t>& obs_shape) {
  // auto: the Nature CNN for images it fits (Atari's 84x84), the IMPALA CNN for smaller ones (MinAtar's 10x10).
  const bool image = obs_shape.size() == 3;
  const std::string kind = encoder != "auto" ? encoder
                           : !image           ? "mlp"
                           : obs_shape[1] >= 36 && obs_shape[2] >= 36 ? "nature_cnn"
                                                                      : "impala_cnn";
  if (kind == "mlp") return kind;
  if (obs_shape.size() != 3)
    throw ConfigError(fmt::format("config key 'model.encoder' = \"{}\": expected image observations [C, H, W], "
                                  "the env's are [{}]",
                                  encoder, fmt::join(obs_shape, ", ")));
  // nature_cnn: 8x8/4, 4x4/2 and 3x3/1 must fit; minatar_cnn: one unpadded 3x3
  const int64_t min_hw = kind == "nature_cnn" ? 36 : kind == "minatar_cnn" ? 3 : 1;
  if (obs_shape[1] < min_hw || obs_shape[2] < min_hw)
    throw ConfigError(fmt::format("config key 'model.encoder' = \"{}\": observations [{}] are smaller than its "
                                  "{}x{} minimum",
                                  encoder, fmt::join(obs_shape, ", "), min_hw, min_hw));
  return kind;
}

int64_t encoder_out_size(const std::string& kind, const std::vector<int64_t>& hidden, int64_t obs_size) {
  if (kind == "nature_cnn") return 512;
  if (kind == "impala_cnn") return 256;
  if (kind == "minatar_cnn") return 128;
  return hidden.empty() ? obs_size : hidden.back();
}

ConvEncoderImpl::ConvEncoderImpl(const std::string& kind, const std::vector<int64_t>& obs_shape) : kind_(kind) {
  MPIRL_CHECK(obs_shape.size() == 3, "a CNN encoder needs [C, H, W] observations");
  using torch::nn::Conv2dOptions;
  int64_t in = obs_shape[0];
  if (kind_ == "impala_cnn") {
    int k = 0;
    for (int64_t c : {16, 32, 32}) {
      Stage s;
      s.conv = register_module("conv" + std::to_string(k), torch::nn::Conv2d(Conv2dOptions(in, c, 3).padding(1)));
      for (int r = 0; r < 4; ++r)
        s.res.push_back(register_module(fmt::format("res{}_{}", k, r), torch::nn::Conv2d(Conv2dOptions(c, c, 3).padding(1))));
      stages_.push_back(std::move(s));
      in = c;
      ++k;
    }
  } else if (kind_ == "minatar_cnn") {
    Stage s;
    s.conv = register_module("conv0", torch::nn::Conv2d(Conv2dOptions(in, 16, 3)));
    stages_.push_back(std::move(s));
  } else {
    const int64_t ch[3] = {32, 64, 64}, ks[3] = {8, 4, 3}, st[3] = {4, 2, 1};
    for (int k = 0; k < 3; ++k) {
      Stage s;
      s.conv = register_module("conv" + std::to_string(k), torch::nn::Conv2d(Conv2dOptions(in, ch[k], ks[k]).stride(st[k])));
      stages_.push_back(std::move(s));
      in = ch[k];
    }
  }
  torch::NoGradGuard g;  // the flattened size, from one forward of a zero image
  const int64_t flat = features(torch::zeros({1, obs_shape[0], obs_shape[1], obs_shape[2]})).size(1);
  out_ = encoder_out_size(kind_, {}, 0);
  fc_ = register_module("fc", torch::nn::Linear(flat, out_));
}

torch::Tensor ConvEncoderImpl::features(const torch::Tensor& x) {
  torch::Tensor h = x;
  for (auto& s : stages_) {
    if (kind_ != "impala_cnn") {
      h = torch::relu(s.conv(h));
      continue;
    }
    h = torch::max_pool2d(s.conv(h), 3, 2, 1);
    for (size_t r = 0; r < s.res.size(); r += 2) h = h + s.res[r + 1](torch::relu(s.res[r](torch::relu(h))));
  }
  if (kind_ == "impala_cnn") h = torch::relu(h);
  return h.flatten(1);
}

torch::Tensor ConvEncoderImpl::forward(const torch::Tensor& x) { return torch::relu(fc_(features(x))); }

}  // namespace mpirl::models
