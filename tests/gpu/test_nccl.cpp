// The NCCL gradient reducer on one GPU: a one-rank communicator (all this machine allows; the
// multi-GPU all-reduce needs a machine with two GPUs). Gradients are packed into the device
// bucket, all-reduced with ncclAvg on the compute stream, unpacked; a missing gradient becomes
// zeros, and repeated calls reuse the bucket after the previous all-reduce has completed.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include "learner/nccl_reducer.h"

using namespace mpirl::learner;

TEST(NcclReducer, OneRankCommunicatorAveragesOnTheDevice) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no CUDA device visible: run the GPU tests on a GPU machine";
  ASSERT_TRUE(nccl_available()) << "built without NCCL";
  int init = 0;
  MPI_Initialized(&init);
  if (!init) MPI_Init(nullptr, nullptr);  // singleton MPI: MPI_COMM_SELF carries the unique id
  ReducerRequest req;
  req.device = torch::Device(torch::kCUDA, 0);
  req.host = "gpu-test";
  req.timeout_s = 30;
  auto reducer = make_nccl_reducer(MPI_COMM_SELF, 1, req);
  auto opts = torch::TensorOptions().device(req.device).requires_grad(true);
  std::vector<torch::Tensor> params{torch::randn({7, 3}, opts), torch::randn({5}, opts), torch::randn({2, 2}, opts)};
  std::vector<torch::Tensor> want;
  for (int round = 0; round < 3; ++round) {
    want.clear();
    for (size_t i = 0; i < 2; ++i) {
      params[i].mutable_grad() = torch::randn_like(params[i]);
      want.push_back(params[i].grad().clone());
    }
    params[2].mutable_grad() = torch::Tensor();  // no gradient: averaged as zeros
    reducer->average(params);
    torch::cuda::synchronize();
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(torch::equal(params[i].grad(), want[i])) << "round " << round;
    ASSERT_TRUE(params[2].grad().defined());
    EXPECT_EQ(params[2].grad().abs().sum().item<float>(), 0.0f);
    EXPECT_EQ(params[2].grad().device(), req.device);
  }
}
