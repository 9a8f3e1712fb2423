#pragma once
// Convolutional encoders for image observations, channels first [C, H, W]:
//   nature_cnn  the DQN Nature network: conv 32 8x8/4, conv 64 4x4/2, conv 64 3x3/1 (ReLU each),
//               flatten, linear 512, ReLU
//   impala_cnn  the IMPALA paper's residual network: for 16, 32, 32 channels a 3x3 conv, a 3x3/2
//               max pool and two residual blocks (ReLU, conv 3x3, ReLU, conv 3x3, + input); then
//               ReLU, flatten, linear 256, ReLU
//   minatar_cnn the MinAtar paper's DQN network (Young & Tian 2019, kenjyoung/MinAtar
//               examples/dqn.py): conv 16 3x3/1 without padding, ReLU, flatten, linear 128, ReLU
// Input [N, C, H, W] float (pixels already scaled), output [N, out_size()].
#include <string>
#include <vector>

#include <torch/torch.h>

namespace mpirl::models {

// model.encoder resolved for an observation shape: "auto" is nature_cnn for rank-3 observations
// of at least 36x36, impala_cnn for smaller images, and mlp otherwise. Throws ConfigError (naming model.encoder and the shape) for a CNN on
// observations that are not [C, H, W] or too small for it.
std::string resolve_encoder(const std::string& encoder, const std::vector<int64_t>& obs_shape);

// The feature size a resolved encoder gives: 512, 256 and 128 for the CNNs; the last hidden width
// (or the observation size without one) for the mlp.
int64_t encoder_out_size(const std::string& kind, const std::vector<int64_t>& hidden, int64_t obs_size);

class ConvEncoderImpl : public torch::nn::Module {
 public:
  ConvEncoderImpl(const std::string& kind, const std::vector<int64_t>& obs_shape);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t out_size() const { return out_; }

 private:
  struct Stage {
    torch::nn::Conv2d conv{nullptr};
    std::vector<torch::nn::Conv2d> res;  // 2 blocks x 2 convs (impala_cnn)
  };
  torch::Tensor features(const torch::Tensor& x);
  std::string kind_;
  std::vector<Stage> stages_;
  torch::nn::Linear fc_{nullptr};
  int64_t out_ = 0;
};
TORCH_MODULE(ConvEncoder);

}  // namespace mpirl::models
