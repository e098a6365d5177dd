// A check every elementwise optimizer shares: bf16 and f16 params update in
// float32 and round once to their dtype (optax.apply_updates'
// astype(param.dtype)), so one step on a half param equals the float32 step
// on its widened values, then rounded; the slots stay float32.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/ops.h"
#include "t5x/optim/optimizer.h"

namespace t5x::testing {

// `slot`: a per-param slot key of `opt` for param "w" that must stay float32
// ("" when the optimizer keeps none to check).
inline void expect_half_params_round_once(const Optimizer& opt, int64_t n, const std::string& slot = "") {
  std::vector<float> pv(static_cast<size_t>(n)), gv(static_cast<size_t>(n));
  for (size_t i = 0; i < pv.size(); ++i) {
    pv[i] = float(std::sin(double(i))) * 0.3f;
    gv[i] = float(std::cos(0.3 * double(i)));
  }
  const Shape s{{"embed", n}};
  for (DType dt : {DType::bf16, DType::f16}) {
    ParamTree half{{"w", Array::from_floats(s, pv, dt)}};
    ParamTree wide{{"w", Array::from_vector(s, half.at("w").to_floats())}};
    const ParamTree g{{"w", Array::from_vector(s, gv)}};
    OptimizerState sh = opt.init(half), sw = opt.init(wide);
    opt.apply_gradient(half, sh, g, 0.01);
    opt.apply_gradient(wide, sw, g, 0.01);
    ASSERT_EQ(half.at("w").dtype(), dt);
    if (!slot.empty()) {
      EXPECT_EQ(sh.slots.at(slot).dtype(), DType::f32) << slot;
    }
    EXPECT_EQ(half.at("w").to_floats(), cast(wide.at("w"), dt).to_floats()) << dtype_name(dt);
  }
}

}  // namespace t5x::testing
