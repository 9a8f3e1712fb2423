// Learner parts that need no MPI: truncation bootstraps valued with the current parameters,
// gradient clipping without a host sync (against LibTorch's clip_grad_norm_), the publish schedule.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "envs/registry.h"
#include "learner/device.h"
#include "learner/publish_schedule.h"
#include "learner/trainer.h"

using namespace mpirl;
using namespace mpirl::learner;

namespace {
TrainBatch batch(int64_t T, int64_t B, int64_t D) {
  TrainBatch b;
  b.obs = torch::randn({T + 1, B, D});
  b.is_init = torch::zeros({T + 1, B});
  b.actions = torch::zeros({T, B}, torch::kInt64);
  b.rewards = torch::ones({T, B});
  b.terminated = torch::zeros({T, B});
  b.truncated = torch::zeros({T, B});
  b.behaviour_logp = torch::full({T, B}, std::log(0.5));
  return b;
}
}  // namespace

TEST(Trainer, TruncationBootstrapUsesTheCurrentParameters) {
  for (const char* core : {"none", "lru"}) {
    SCOPED_TRACE(core);
    Config cfg = load_config("", {std::string("model.core=\"") + core + "\"", "model.core_state=4", "model.core_size=8"});
    auto spec = envs::env_spec(cfg);
    NoReducer none;
    Trainer tr(cfg, spec, torch::kCPU, none);
    auto& pol = tr.policy();
    const int64_t T = 4, B = 3, D = spec.obs_size(), S = pol->state_size();
    auto b = batch(T, B, D);
    b.truncated[2][1] = 1;
    b.truncated[3][0] = 1;
    BootInputs boot;
    boot.obs = torch::randn({2, D});
    if (S > 0) boot.state = torch::randn({2, S});
    boot.t = torch::tensor({2, 3}, torch::kInt64);
    boot.b = torch::tensor({1, 0}, torch::kInt64);
    boot.count = 2;
    tr.bootstrap(b, boot);
    torch::NoGradGuard g;
    auto want = pol->value_after(boot.obs, boot.state);
    EXPECT_FLOAT_EQ(b.trunc_value[2][1].item<float>(), want[0].item<float>());
    EXPECT_FLOAT_EQ(b.trunc_value[3][0].item<float>(), want[1].item<float>());
    EXPECT_EQ(b.trunc_value.abs().sum().item<float>(),
              std::abs(want[0].item<float>()) + std::abs(want[1].item<float>()));  // zeros elsewhere
    // New parameters, new bootstrap values: the value head's bias moves every value by 0.5.
    for (auto& item : pol->named_parameters())
      if (item.key() == "v.bias") item.value().add_(0.5);
    tr.bootstrap(b, boot);
    EXPECT_NEAR(b.trunc_value[2][1].item<float>(), want[0].item<float>() + 0.5f, 1e-6);
    EXPECT_NEAR(b.trunc_value[3][0].item<float>(), want[1].item<float>() + 0.5f, 1e-6);
  }
}

TEST(Trainer, ClipGradNormMatchesLibTorch) {
  torch::manual_seed(3);
  for (double max_norm : {0.1, 1.0, 100.0}) {
    std::vector<torch::Tensor> a, b;
    for (auto shape : {std::vector<int64_t>{3, 4}, {7}, {2, 2, 2}}) {
      auto g = torch::randn(shape) * 3;
      auto pa = torch::zeros(shape, torch::requires_grad()), pb = torch::zeros(shape, torch::requires_grad());
      pa.mutable_grad() = g.clone();
      pb.mutable_grad() = g.clone();
      a.push_back(pa);
      b.push_back(pb);
    }
    double ref = torch::nn::utils::clip_grad_norm_(b, max_norm);
    auto norm = clip_grad_norm(a, max_norm);
    EXPECT_NEAR(norm.item<double>(), ref, 1e-5 * ref);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad(), 1e-5, 1e-6));
  }
}

TEST(PublishSchedule, ADuePublishWaitsForTheChannelAndCarriesTheNewestVersion) {
  PublishSchedule s;
  EXPECT_EQ(s.take(true), -1);  // nothing due
  s.due(4);
  EXPECT_EQ(s.take(false), -1);  // broadcast still in flight: not now...
  s.due(8);
  EXPECT_EQ(s.take(false), -1);
  EXPECT_EQ(s.take(true), 8);  // ...but as soon as it completes, with the newest version
  EXPECT_EQ(s.take(true), -1);
  EXPECT_EQ(s.published(), 1);
  EXPECT_EQ(s.last_version(), 8);
}

TEST(GpuPick, ByIndexAmongTheNodesLearnersNotByLocalRank) {
  // Two learners on a node with two GPUs: one each, whatever their world or local ranks.
  auto a = pick_gpu("auto", 0, 2, 2, 0, "n1"), b = pick_gpu("auto", 1, 2, 2, 5, "n1");
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(b.device, 1);
  EXPECT_FALSE(a.shared || b.shared);
  EXPECT_TRUE(a.note.empty());
  // One learner per node (4 GPUs each): always cuda:0, never its world rank modulo the count.
  EXPECT_EQ(pick_gpu("auto", 0, 1, 4, 3, "n2").device, 0);
  // Three learners, two GPUs: round-robin, and reported naming the host and the device.
  auto c = pick_gpu("auto", 2, 3, 2, 7, "gpu-node-9");
  EXPECT_EQ(c.device, 0);
  EXPECT_TRUE(c.shared);
  EXPECT_NE(c.note.find("gpu-node-9"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("cuda:0"), std::string::npos) << c.note;
  // No GPU: CPU for "auto", an error naming rank and host for "cuda"; "cpu" ignores GPUs.
  EXPECT_EQ(pick_gpu("auto", 0, 1, 0, 0, "n3").device, -1);
  EXPECT_EQ(pick_gpu("cpu", 0, 1, 8, 0, "n3").device, -1);
  try {
    pick_gpu("cuda", 0, 1, 0, 4, "cpu-node-2");
    FAIL() << "expected an error";
  } catch (const mpirl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 4 @ cpu-node-2"), std::string::npos) << e.what();
  }
}
