// The process-wide SPMD context: the device mesh this process runs on and its
// communication groups (one communicator per subset of mesh axes).
//
// Every sharded Array names a MeshDesc; the spmd ops run their collectives on
// the groups of the current context, whose mesh must have the same axes and
// sizes (t5x: the partitioner's mesh, set once at startup). Without a call to
// set_context(), the context is a single process on mesh (data=1, model=1).
//
//   auto ctx = spmd::Context::create({2, 4});           // MPI world of 8 processes
//   spmd::set_context(ctx);                             // collective: all ranks together
//   Sharding s = ctx->sharding({{"data"}, {}});         // P('data', None) on that mesh
//
// Errors: "[spmd] ..." std::invalid_argument, e.g. when an array lives on a
// mesh other than the context's.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/sharding.h"
#include "mesh/mesh.h"
#include "mesh/mesh_groups.h"

namespace t5x::spmd {

class Context {
 public:
  // Binds `mesh` to the world group `world` (sizes must match; collective).
  Context(const Mesh& mesh, std::shared_ptr<Communicator> world);

  // Mesh of `axis_sizes` over the world communicator (MPI when launched by
  // mpiexec, else single-process); this process's device id is its rank.
  static std::shared_ptr<Context> create(std::vector<int64_t> axis_sizes,
                                         std::vector<std::string> axis_names = {"data", "model"});

  const Mesh& mesh() const { return groups_->mesh(); }
  std::shared_ptr<const MeshDesc> desc() const { return mesh().desc_ptr(); }
  MeshGroups& groups() { return *groups_; }
  // Communicator over `axes` (in the order given: its rank is the shard index
  // of a dim split over those axes).
  Communicator& over(const std::vector<std::string>& axes) { return groups_->over(axes); }
  // Sharding on this mesh with `spec`.
  Sharding sharding(PartitionSpec spec) const { return Sharding{desc(), std::move(spec)}; }

  // Mesh-invariant numerics. Off (GSPMD's choice): a contraction or reduction
  // over a split dim sums per-device partials across devices, so a result
  // depends on the mesh by float rounding. On: no sum is ever split; the
  // operands are gathered along the summed dims and the work is split over
  // kept dims instead (rows or columns of each product), and einsum gradients
  // are einsums planned the same way (not the transpose of the forward's
  // collectives). Every sum is then whole on one device, as on one process;
  // a device computes a block of each product with the same kernel, so the
  // results are bitwise one process's wherever the GEMM sums an element in
  // the same order for a block as for the whole product
  // (kernels::cpu::gemm_block_invariant: for small k; otherwise they differ
  // by float rounding, as one process with another thread count does).
  // Costs more traffic than partial sums (gathers of activations and weights
  // instead of one all-reduce per contraction).
  bool mesh_invariant() const { return mesh_invariant_; }
  void set_mesh_invariant(bool on) { mesh_invariant_ = on; }

 private:
  std::shared_ptr<MeshGroups> groups_;
  bool mesh_invariant_ = false;
};

// The current context (single-process 1x1 by default).
Context& context();
std::shared_ptr<Context> context_ptr();
// Replaces the current context (nullptr restores the default).
void set_context(std::shared_ptr<Context> ctx);

// RAII: uses `ctx` for the scope's lifetime (tests switch meshes with it).
class ContextScope {
 public:
  explicit ContextScope(std::shared_ptr<Context> ctx);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  std::shared_ptr<Context> prev_;
};

}  // namespace t5x::spmd
