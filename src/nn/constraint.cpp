#include "nn/constraint.h"

namespace t5x::nn {

namespace {
ActivationConstraint& current() {
  static ActivationConstraint fn;
  return fn;
}
}  // namespace

Array constrain(const Array& x) {
  const auto& fn = current();
  return fn ? fn(x) : x;
}

ActivationConstraintScope::ActivationConstraintScope(ActivationConstraint fn) : prev_(std::move(current())) {
  current() = std::move(fn);
}

ActivationConstraintScope::~ActivationConstraintScope() { current() = std::move(prev_); }

}  // namespace t5x::nn
