// Umbrella header for the op layer: every public op family plus autodiff.
// See docs/core.md for the array model, dtype rules and the op list.
#pragma once
#include "core/array.h"
#include "core/random.h"
#include "ops/autodiff.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/fourier.h"
#include "ops/fused.h"
#include "ops/index.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
