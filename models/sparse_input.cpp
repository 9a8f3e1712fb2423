#include "models/sparse_input.h"

namespace mpirl::models {

SparseRows sparse_rows(const torch::Tensor& raw) {
  TORCH_CHECK(raw.dim() == 2 && raw.scalar_type() == torch::kUInt8 && raw.device().is_cpu(),
              "sparse_rows: uint8 [n, d] observations on the CPU, got ", raw.sizes(), " ", raw.scalar_type());
  const auto x = raw.contiguous();
  SparseRows s;
  s.n = x.size(0);
  s.d = x.size(1);
  const uint8_t* p = x.data_ptr<uint8_t>();
  const int64_t total = s.n * s.d;
  int64_t nnz = 0;
  for (int64_t k = 0; k < total; ++k) nnz += p[k] != 0;
  const auto i64 = torch::TensorOptions().dtype(torch::kInt64);
  s.row_offsets = torch::empty({s.n}, i64);
  s.cols = torch::empty({nnz}, i64);
  s.vals = torch::empty({nnz}, torch::kFloat32);
  s.col_offsets = torch::zeros({s.d}, i64);
  s.rows = torch::empty({nnz}, i64);
  s.col_vals = torch::empty({nnz}, torch::kFloat32);
  int64_t *ro = s.row_offsets.data_ptr<int64_t>(), *cols = s.cols.data_ptr<int64_t>();
  int64_t *co = s.col_offsets.data_ptr<int64_t>(), *rows = s.rows.data_ptr<int64_t>();
  float *vals = s.vals.data_ptr<float>(), *cvals = s.col_vals.data_ptr<float>();
  const float scale = float(1.0 / 255);  // as input(): float(v) * float(1/255)
  std::vector<int64_t> count(size_t(s.d) + 1, 0);
  int64_t e = 0;
  for (int64_t i = 0; i < s.n; ++i) {
    ro[i] = e;
    const uint8_t* r = p + i * s.d;
    for (int64_t j = 0; j < s.d; ++j) {
      if (r[j] == 0) continue;
      cols[e] = j;
      vals[e] = float(r[j]) * scale;
      ++count[size_t(j) + 1];
      ++e;
    }
  }
  for (int64_t j = 0; j < s.d; ++j) count[size_t(j) + 1] += count[size_t(j)];
  for (int64_t j = 0; j < s.d; ++j) co[j] = count[size_t(j)];
  for (int64_t i = 0; i < s.n; ++i) {  // rows in increasing order within each input's group
    const int64_t end = i + 1 < s.n ? ro[i + 1] : nnz;
    for (int64_t k = ro[i]; k < end; ++k) {
      const int64_t at = count[size_t(cols[k])]++;
      rows[at] = i;
      cvals[at] = vals[k];
    }
  }
  return s;
}

namespace {

// sum over the entries of each bag of vals * table[index]: [bags, table.size(1)]
torch::Tensor bag_sum(const torch::Tensor& table, const torch::Tensor& index, const torch::Tensor& offsets,
                      const torch::Tensor& vals) {
  return std::get<0>(at::embedding_bag(table, index, offsets, false, /*mode sum*/ 0, false, vals, false));
}

struct SparseLinearFn : torch::autograd::Function<SparseLinearFn> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               const torch::Tensor& bias, const SparseRows* s) {
    ctx->saved_data["rows"] = s->rows;
    ctx->saved_data["col_offsets"] = s->col_offsets;
    ctx->saved_data["col_vals"] = s->col_vals;
    auto out = bag_sum(weight.t().contiguous(), s->cols, s->row_offsets, s->vals);
    return out.add_(bias);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto g = grads[0].contiguous();  // [n, out]
    const auto dwt = bag_sum(g, ctx->saved_data["rows"].toTensor(), ctx->saved_data["col_offsets"].toTensor(),
                             ctx->saved_data["col_vals"].toTensor());  // [d, out]
    return {dwt.t().contiguous(), g.sum(0), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor sparse_linear(const SparseRows& s, const torch::Tensor& weight, const torch::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2 && weight.size(1) == s.d, "sparse_linear: weight ", weight.sizes(), " for ", s.d, " inputs");
  return SparseLinearFn::apply(weight, bias, &s);
}

}  // namespace mpirl::models
