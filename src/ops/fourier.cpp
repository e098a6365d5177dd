#include "ops/fourier.h"

#include <cmath>
#include <numbers>

#include "backend/kernels.h"
#include "ops/detail.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/fused.h"
#include "ops/lowering.h"
#include "ops/primitive.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {
constexpr const char* kOp = "fourier_mix";

// f32 x [..., L, d] (length and embed last) -> y, same shape.
class FourierMix : public Primitive {
 public:
  FourierMix(int64_t length, int64_t embed) : length_(length), embed_(embed) {}
  const char* name() const override { return kOp; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {mix(in[0])}; }
  // The map is symmetric (see fourier.h): the cotangent goes through it too.
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {mix(cot[0])};
  }

 private:
  Array mix(const Array& x) const {
    Array y = make_output(x.shape(), DType::f32, {x});
    const int64_t n = length_ * embed_;
    kernels::cpu::fourier_mix(n ? x.size() / n : 0, length_, embed_, x.data<float>(), y.data<float>());
    return y;
  }
  int64_t length_, embed_;
};

void check_args(const Array& x, const std::string& length, const std::string& embed) {
  check_floating(kOp, x);
  require_dim(kOp, x, length);
  require_dim(kOp, x, embed);
  if (length == embed) throw_invalid(kOp, "length and embed must be different dims, both are '" + length + "'");
}

Array fourier_mix_local(const Array& x, const std::string& length, const std::string& embed) {
  if (!fused_kernels_enabled()) return fourier_mix_reference(x, length, embed);
  check_args(x, length, embed);
  std::vector<std::string> order;
  for (const auto& n : x.names())
    if (n != length && n != embed) order.push_back(n);
  order.push_back(length);
  order.push_back(embed);
  Array xt = cast(transpose(x, order), DType::f32);
  Array y = apply1(std::make_shared<FourierMix>(x.dim(length), x.dim(embed)), {xt});
  return cast(transpose(y, x.names()), x.dtype());
}

// cos or sin (2 pi jk / n) as [a=n, b=n]; jk reduced mod n first, exactly.
Array dft_part(int64_t n, bool sine, const std::string& a, const std::string& b) {
  std::vector<float> v(size_t(n * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t k = 0; k < n; ++k) {
      const double t = 2.0 * std::numbers::pi * double((j * k) % n) / double(n);
      v[size_t(j * n + k)] = float(sine ? std::sin(t) : std::cos(t));
    }
  return Array::from_floats(Shape{{a, n}, {b, n}}, v);
}

}  // namespace

Array fourier_mix(const Array& x, const std::string& length, const std::string& embed) {
  return composite1(
      kOp, {x}, [&](const std::vector<Array>& in) { return fourier_mix_local(in[0], length, embed); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.fourier_mix(in[0], length, embed); });
}

Array fourier_mix_reference(const Array& x, const std::string& length, const std::string& embed) {
  check_args(x, length, embed);
  const std::string l_in = length + "__in", e_in = embed + "__in";
  const int64_t L = x.dim(length), d = x.dim(embed);
  Array xf = rename(cast(x, DType::f32), {{length, l_in}, {embed, e_in}});
  // part(F_L) X part(F_d): contract the input length, then the input embed.
  auto product = [&](bool sine) {
    Array t = matmul(xf, dft_part(L, sine, l_in, length), l_in);
    return transpose(matmul(t, dft_part(d, sine, e_in, embed), e_in), x.names());
  };
  return cast(sub(product(false), product(true)), x.dtype());
}

}  // namespace t5x
