#pragma once
// A first linear layer over sparse uint8 observations (model.sparse_input). MinAtar's images are
// 10 x 10 x C channels of 0 and 255 with 1-8% of them set, flattened into an MLP: the first layers
// of the torso and the critic are most of the learner's arithmetic, and nearly all of it multiplies
// zeros. Here each row's nonzero inputs are listed once (CSR, and by column for the backward pass),
// the forward pass sums the weight columns of a row's inputs (scaled as input() scales pixels, by
// 1/255) and the weight's gradient sums the output gradients of each column's rows: two
// embedding_bag sums instead of two dense matrix products. The same function of the weights as
// the dense layer; only the order of float additions differs.
#include <torch/torch.h>

namespace mpirl::models {

struct SparseRows {
  int64_t n = 0, d = 0;           // rows (observations) and inputs per row
  torch::Tensor row_offsets;      // [n] int64: where row i's entries start in cols/vals
  torch::Tensor cols, vals;       // [nnz] int64 input index, float value (pixel / 255)
  torch::Tensor col_offsets;      // [d] int64: where input j's entries start in rows/col_vals
  torch::Tensor rows, col_vals;   // [nnz] the same entries grouped by input
};

// The nonzero entries of raw [n, d] uint8 observations on the CPU.
SparseRows sparse_rows(const torch::Tensor& raw);

// weight [out, d], bias [out] -> [n, out]: x W^T + b for x = raw / 255, differentiable in the
// weight and the bias (not in x).
torch::Tensor sparse_linear(const SparseRows& s, const torch::Tensor& weight, const torch::Tensor& bias);

}  // namespace mpirl::models
