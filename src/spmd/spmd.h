// Umbrella header of the spmd layer (docs/spmd.md): context, differentiable
// collectives, local views, resharding, sharded op lowerings, parameter
// partitioning and the op layer's sharded lowering (spmd::Lowering).
#pragma once
#include "spmd/collectives.h"
#include "spmd/context.h"
#include "spmd/dispatch.h"
#include "spmd/einsum.h"
#include "spmd/elementwise.h"
#include "spmd/fused.h"
#include "spmd/index.h"
#include "spmd/local.h"
#include "spmd/params.h"
#include "spmd/reduce.h"
#include "spmd/reshard.h"
#include "spmd/shape_ops.h"
