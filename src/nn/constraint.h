// Activation sharding-constraint hook (flax with_sharding_constraint /
// t5x's activation_partitioning calls), kept out of the model's math.
//
// The models call constrain(x) where t5x constrains activations: embedded
// inputs and every residual-stream value [batch, length, embed], and the
// MLP hidden [batch, length, mlp] (when the MLP is not the fused gated-GELU
// kernel). By default it returns x. A distributed
// runner installs a function, e.g. one that calls
// spmd::with_sharding_constraint(x, rules), so activations take their
// logical-axis layout; the dim names are the logical axis names.
// The hook is process-wide; ActivationConstraintScope restores the previous one.
#pragma once
#include <functional>

#include "core/array.h"

namespace t5x::nn {

using ActivationConstraint = std::function<Array(const Array&)>;

Array constrain(const Array& x);

class ActivationConstraintScope {
 public:
  explicit ActivationConstraintScope(ActivationConstraint fn);
  ~ActivationConstraintScope();
  ActivationConstraintScope(const ActivationConstraintScope&) = delete;
  ActivationConstraintScope& operator=(const ActivationConstraintScope&) = delete;

 private:
  ActivationConstraint prev_;
};

}  // namespace t5x::nn
