#pragma once
// Scalar arithmetic shared by the CPU and CUDA scan kernels: real types and an interleaved complex
// type with plain multiply-adds (std::complex's NaN-aware multiply calls a library routine).
#if defined(__CUDACC__)
#define MPIRL_HD __host__ __device__ __forceinline__
#else
#define MPIRL_HD inline
#endif

namespace mpirl::kernels {

template <typename R>
struct alignas(2 * sizeof(R)) Cx {
  R re, im;
};

template <typename R>
MPIRL_HD Cx<R> operator*(Cx<R> x, Cx<R> y) {
  return {x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
}
template <typename R>
MPIRL_HD Cx<R> operator+(Cx<R> x, Cx<R> y) {
  return {x.re + y.re, x.im + y.im};
}
template <typename R>
MPIRL_HD Cx<R> conj(Cx<R> x) {
  return {x.re, -x.im};
}
MPIRL_HD float conj(float x) { return x; }
MPIRL_HD double conj(double x) { return x; }

template <typename S>
struct ScalarOps {
  MPIRL_HD static S zero() { return S(0); }
  MPIRL_HD static S one() { return S(1); }
};
template <typename R>
struct ScalarOps<Cx<R>> {
  MPIRL_HD static Cx<R> zero() { return {R(0), R(0)}; }
  MPIRL_HD static Cx<R> one() { return {R(1), R(0)}; }
};

}  // namespace mpirl::kernels
