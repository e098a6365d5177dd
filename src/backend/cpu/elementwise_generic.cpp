// Generic (all-dtype, strided) elementwise loops of kernels::cpu
// (backend/kernels.h): unary, binary, where, cast. The float32 / bfloat16
// fast paths call the Highway kernels of unary.cpp, binary.cpp, convert.cpp.
#include <cmath>
#include <vector>

#include "backend/cpu/binary.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/loops.h"
#include "backend/cpu/unary.h"
#include "backend/kernels.h"

namespace t5x::kernels::cpu {
using t5x::cpu::compute_t;
using t5x::cpu::kParallelThreshold;
using t5x::cpu::ld;
using t5x::cpu::st;
using t5x::cpu::strided_loop;
using U = UnaryKind;
using B = BinaryKind;

namespace {

template <typename C>
inline C unary_eval(U op, C x) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case U::Neg: return -x;
      case U::Abs: return std::fabs(x);
      case U::Sign: return C((x > 0) - (x < 0));
      case U::Square: return x * x;
      case U::Log: return std::log(x);
      case U::Sqrt: return std::sqrt(x);
      case U::Rsqrt: return C(1) / std::sqrt(x);
      case U::Relu: return x > 0 ? x : C(0);
      case U::Not: return x == 0;
      // exp, tanh, sigmoid, gelu: the Highway kernels (kernel_of).
      default: return x;
    }
  } else {
    switch (op) {
      case U::Neg: return C(-x);
      case U::Abs: return x < 0 ? C(-x) : x;
      case U::Sign: return C((x > 0) - (x < 0));
      case U::Square: return C(x * x);
      case U::Relu: return x > 0 ? x : C(0);
      case U::Not: return C(x == 0);
      default: return x;
    }
  }
  return x;
}

// exp / tanh / sigmoid / gelu of float dtypes run on the Highway kernels,
// one formula per function, bitwise the same on every CPU target; 16-bit
// floats are widened to f32 and rounded once.
bool kernel_of(U op, t5x::cpu::UnaryKernel& k) {
  using K = t5x::cpu::UnaryKernel;
  switch (op) {
    case U::Exp: k = K::Exp; return true;
    case U::Tanh: k = K::Tanh; return true;
    case U::Sigmoid: k = K::Sigmoid; return true;
    case U::Gelu: k = K::Gelu; return true;
    case U::GeluGrad: k = K::GeluGrad; return true;
    default: return false;
  }
}

template <typename C>
inline C arith(B op, C a, C b) {
  switch (op) {
    case B::Add: return C(a + b);
    case B::Sub: return C(a - b);
    case B::Mul: return C(a * b);
    case B::Div:
      if constexpr (std::is_integral_v<C>) return b == 0 ? C(0) : C(a / b);
      else return a / b;
    case B::Max: return a > b || a != a ? a : b;  // NaN-propagating
    case B::Min: return a < b || a != a ? a : b;
    default: return a;
  }
}
template <typename C>
inline uint8_t compare(B op, C a, C b) {
  switch (op) {
    case B::Eq: return a == b;
    case B::Ne: return a != b;
    case B::Lt: return a < b;
    case B::Le: return a <= b;
    case B::Gt: return a > b;
    case B::Ge: return a >= b;
    case B::And: return (a != 0) && (b != 0);
    case B::Or: return (a != 0) || (b != 0);
    default: return 0;
  }
}
bool is_cmp(B op) { return op >= B::Eq; }

}  // namespace

void unary(UnaryKind op, DType dtype, const void* x, void* out, int64_t n) {
  t5x::cpu::UnaryKernel k;
  if (is_floating(dtype) && kernel_of(op, k)) {
    if (dtype == DType::f32) {
      t5x::cpu::unary_f32(k, static_cast<const float*>(x), static_cast<float*>(out), n);
      return;
    }
    std::vector<float> buf(static_cast<size_t>(n));
    dispatch_dtype(dtype, [&](auto t) {
      using T = decltype(t);
      const T* a = static_cast<const T*>(x);
      for (int64_t i = 0; i < n; ++i) buf[size_t(i)] = float(ld(a[i]));
      t5x::cpu::unary_f32(k, buf.data(), buf.data(), n);
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = st<T>(buf[size_t(i)]);
    });
    return;
  }
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    const T* a = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) o[i] = st<T>(unary_eval<compute_t<T>>(op, ld(a[i])));
  });
}

bool binary_dense(BinaryKind op, DType dtype, int64_t n, const void* a, const void* b, void* out) {
  // Same-shape add / sub / mul of f32 or bf16 (residual adds, gradient
  // accumulation): one vectorised pass.
  if (!(op == B::Add || op == B::Sub || op == B::Mul) || !(dtype == DType::f32 || dtype == DType::bf16)) return false;
  using K = t5x::cpu::BinaryKernel;
  const K code = op == B::Add ? K::Add : op == B::Sub ? K::Sub : K::Mul;
  if (dtype == DType::f32)
    t5x::cpu::binary_f32(code, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(out), n);
  else
    t5x::cpu::binary_bf16(code, static_cast<const bfloat16*>(a), static_cast<const bfloat16*>(b),
                          static_cast<bfloat16*>(out), n);
  return true;
}

void binary(BinaryKind op, DType dtype, const Strided<2>& s, const void* a, const void* b, void* out) {
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    if (is_cmp(op)) {
      uint8_t* po = static_cast<uint8_t*>(out);
      strided_loop<2>(s.sizes, s.strides, [&](int64_t o, std::array<int64_t, 2> in, int64_t len,
                                                 std::array<int64_t, 2> sd) {
        for (int64_t j = 0; j < len; ++j)
          po[o + j] = compare<C>(op, ld(pa[in[0] + j * sd[0]]), ld(pb[in[1] + j * sd[1]]));
      });
      return;
    }
    T* po = static_cast<T*>(out);
    strided_loop<2>(s.sizes, s.strides, [&](int64_t o, std::array<int64_t, 2> in, int64_t len,
                                               std::array<int64_t, 2> sd) {
      const T* x = pa + in[0];
      const T* y = pb + in[1];
      T* z = po + o;
      // Unit / zero strides get their own loops so the compiler vectorises them.
      if (sd[0] == 1 && sd[1] == 1) {
        for (int64_t j = 0; j < len; ++j) z[j] = st<T>(arith<C>(op, ld(x[j]), ld(y[j])));
      } else if (sd[0] == 1 && sd[1] == 0) {
        C yv = ld(y[0]);
        for (int64_t j = 0; j < len; ++j) z[j] = st<T>(arith<C>(op, ld(x[j]), yv));
      } else if (sd[0] == 0 && sd[1] == 1) {
        C xv = ld(x[0]);
        for (int64_t j = 0; j < len; ++j) z[j] = st<T>(arith<C>(op, xv, ld(y[j])));
      } else {
        for (int64_t j = 0; j < len; ++j) z[j] = st<T>(arith<C>(op, ld(x[j * sd[0]]), ld(y[j * sd[1]])));
      }
    });
  });
}

void where(DType dtype, const Strided<3>& s, const uint8_t* cond, const void* x, const void* y, void* out) {
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    const T* px = static_cast<const T*>(x);
    const T* py = static_cast<const T*>(y);
    T* po = static_cast<T*>(out);
    strided_loop<3>(s.sizes, s.strides, [&](int64_t o, std::array<int64_t, 3> in, int64_t len,
                                               std::array<int64_t, 3> sd) {
      for (int64_t j = 0; j < len; ++j)
        po[o + j] = cond[in[0] + j * sd[0]] ? px[in[1] + j * sd[1]] : py[in[2] + j * sd[2]];
    });
  });
}

void float_test(FloatTest test, DType dtype, const void* x, uint8_t* out, int64_t n) {
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    const T* a = static_cast<const T*>(x);
    if (test == FloatTest::IsNan) {
      for (int64_t i = 0; i < n; ++i) {
        const float v = float(ld(a[i]));
        out[i] = v != v;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = std::isfinite(float(ld(a[i])));
    }
  });
}

void cast(DType from, DType to, const void* x, void* out, int64_t n) {
  // The activation-dtype casts of every kernel, each step: vectorised.
  if (from == DType::f32 && to == DType::bf16) {
    t5x::cpu::convert_f32_to_bf16(static_cast<const float*>(x), static_cast<bfloat16*>(out), n);
    return;
  }
  if (from == DType::bf16 && to == DType::f32) {
    t5x::cpu::convert_bf16_to_f32(static_cast<const bfloat16*>(x), static_cast<float*>(out), n);
    return;
  }
  dispatch_dtype(from, [&](auto s) {
    using S = decltype(s);
    dispatch_dtype(to, [&](auto d) {
      using D = decltype(d);
      const S* a = static_cast<const S*>(x);
      D* o = static_cast<D*>(out);
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<D, uint8_t>) o[i] = ld(a[i]) != 0;
        else if constexpr (std::is_same_v<D, bfloat16> || std::is_same_v<D, float16>) o[i] = D(float(ld(a[i])));
        else o[i] = D(ld(a[i]));
      }
    });
  });
}

}  // namespace t5x::kernels::cpu
