#include "mesh/reshard.h"

#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace t5x {
namespace {

using Dims = std::vector<std::vector<std::string>>;

int64_t prod(const std::vector<int64_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < v.size() && i < to; ++i) n *= v[i];
  return n;
}

size_t common_prefix(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

bool axis_in_use(const Dims& dims, const std::string& x) {
  for (const auto& d : dims)
    for (const auto& a : d)
      if (a == x) return true;
  return false;
}

// View of a row-major buffer around dim d: [outer, shape[d], inner] with inner in bytes.
struct DimView {
  int64_t outer, len, inner;
  DimView(const std::vector<int64_t>& shape, int d, size_t esize)
      : outer(prod(shape, 0, d)), len(shape[d]), inner(prod(shape, d + 1) * int64_t(esize)) {}
};

// out = piece `m` of k along dim d.
void take_piece(const char* in, const std::vector<int64_t>& shape, int d, int64_t k, int64_t m, size_t esize,
                char* out) {
  DimView v(shape, d, esize);
  const int64_t chunk = (v.len / k) * v.inner;
  for (int64_t o = 0; o < v.outer; ++o) std::memcpy(out + o * chunk, in + (o * v.len * v.inner) + m * chunk, chunk);
}

// `pieces` = k contiguous blocks of shape `piece_shape`; out = their concat along d.
void concat_pieces(const char* pieces, const std::vector<int64_t>& piece_shape, int d, int64_t k, size_t esize,
                   char* out) {
  DimView v(piece_shape, d, esize);
  const int64_t chunk = v.len * v.inner, block = v.outer * chunk;
  for (int64_t m = 0; m < k; ++m)
    for (int64_t o = 0; o < v.outer; ++o)
      std::memcpy(out + (o * k + m) * chunk, pieces + m * block + o * chunk, chunk);
}

// True when no dim before d is longer than 1: the k pieces along d, one
// after another, are then their concat along d.
bool leading(const std::vector<int64_t>& shape, int d) { return prod(shape, 0, size_t(d)) == 1; }

// Uninitialised bytes: a std::vector<char> would zero them first, one more
// pass over memory that the step overwrites anyway.
class Scratch {
 public:
  char* get(size_t n) {
    if (n > size_) {
      p_.reset(new char[n]);
      size_ = n;
    }
    return p_.get();
  }

 private:
  std::unique_ptr<char[]> p_;
  size_t size_ = 0;
};

}  // namespace

const char* reshard_kind_name(ReshardKind k) {
  switch (k) {
    case ReshardKind::kSlice: return "slice";
    case ReshardKind::kAllGather: return "all_gather";
    case ReshardKind::kAllToAll: return "all_to_all";
    case ReshardKind::kPermute: return "permute";
  }
  return "?";
}

double ReshardPlan::total_bytes() const {
  double b = 0;
  for (const auto& s : steps) b += s.bytes;
  return b;
}

int ReshardPlan::count(ReshardKind k) const {
  int n = 0;
  for (const auto& s : steps) n += s.kind == k;
  return n;
}

std::string ReshardPlan::to_string() const {
  std::ostringstream os;
  os << shape_to_string(shape) << ": " << spec_to_string(src) << " -> " << spec_to_string(dst) << "\n";
  auto dn = [&](int d) { return "dim " + std::to_string(d) + " '" + shape[d].first + "'"; };
  for (const auto& s : steps) {
    os << "  " << reshard_kind_name(s.kind);
    if (s.kind == ReshardKind::kPermute) {
      os << " of " << s.pairs.size() << " pairs";
    } else {
      os << " over '" << s.axis << "' (" << s.group_size << "): ";
      if (s.kind == ReshardKind::kAllToAll) os << dn(s.split_dim) << " <- " << dn(s.dim);
      else os << dn(s.dim);
    }
    os << ", " << s.bytes << " B/rank -> " << spec_to_string(s.spec_after) << "\n";
  }
  return os.str();
}

ReshardPlan plan_reshard(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& src,
                         const PartitionSpec& dst, size_t elem_size) {
  validate_partition_spec(mesh, shape, src);
  validate_partition_spec(mesh, shape, dst);
  ReshardPlan plan{shape, src, dst, elem_size, {}};
  Dims cur = src.dims;
  const Dims& tgt = dst.dims;
  const int rank = int(shape.size());
  auto axis_size = [&](const std::string& x) { return mesh.axis_sizes[mesh.axis_index(x)]; };
  auto removals_done = [&](int d) { return common_prefix(cur[d], tgt[d]) == cur[d].size(); };

  if (src != dst && num_shards(mesh, src) == num_shards(mesh, dst)) {
    auto ra = replicated_axes(mesh, src);
    if (ra == replicated_axes(mesh, dst)) {
      // Same tiles, other device order: device t needs the src shard with
      // t's dst index, from the device with t's coordinates on the replicated axes.
      ReshardStep step;
      step.kind = ReshardKind::kPermute;
      step.group_size = mesh.num_devices();
      step.local_before = step.local_after = local_shape(mesh, shape, src);
      step.spec_after = dst;
      const int64_t n = mesh.num_devices();
      std::vector<std::vector<int64_t>> src_index(n);
      for (int64_t d = 0; d < n; ++d) src_index[d] = shard_index(mesh, src, d);
      for (int64_t t = 0; t < n; ++t) {
        const auto want = shard_index(mesh, dst, t);
        for (int64_t s = 0; s < n; ++s) {
          bool same_replica = true;
          for (const auto& a : ra) {
            int i = mesh.axis_index(a);
            same_replica &= mesh.coord(s, i) == mesh.coord(t, i);
          }
          if (same_replica && src_index[s] == want) {
            step.pairs.push_back({int(s), int(t)});
            if (s == mesh.device_id && t != s) step.bytes = double(prod(step.local_before)) * double(elem_size);
            break;
          }
        }
      }
      if (int64_t(step.pairs.size()) != n) throw std::logic_error("[reshard] permute plan is not a bijection");
      plan.steps.push_back(std::move(step));
      return plan;
    }
  }

  while (cur != tgt) {
    ReshardStep step;
    step.local_before = local_shape(mesh, shape, PartitionSpec(cur));
    const double s_loc = double(prod(step.local_before)) * double(elem_size);
    bool found = false;
    // 1. Slices: a dim whose removals are done gains its next target axis, if free.
    for (int d = 0; d < rank && !found; ++d) {
      if (!removals_done(d) || cur[d].size() >= tgt[d].size()) continue;
      const std::string& x = tgt[d][cur[d].size()];
      if (axis_in_use(cur, x)) continue;
      step.kind = ReshardKind::kSlice, step.axis = x, step.dim = d;
      cur[d].push_back(x);
      found = true;
    }
    // 2. All-to-all: the next target axis of dim j sits at the minor end of a dim i that must lose it.
    for (int j = 0; j < rank && !found; ++j) {
      if (!removals_done(j) || cur[j].size() >= tgt[j].size()) continue;
      const std::string& x = tgt[j][cur[j].size()];
      for (int i = 0; i < rank && !found; ++i) {
        if (i == j || cur[i].empty() || cur[i].back() != x || removals_done(i)) continue;
        step.kind = ReshardKind::kAllToAll, step.axis = x, step.dim = i, step.split_dim = j;
        cur[i].pop_back();
        cur[j].push_back(x);
        found = true;
      }
    }
    // 3. All-gather: peel the minor-most axis that has to go.
    for (int d = 0; d < rank && !found; ++d) {
      if (removals_done(d)) continue;
      step.kind = ReshardKind::kAllGather, step.axis = cur[d].back(), step.dim = d;
      cur[d].pop_back();
      found = true;
    }
    if (!found) throw std::logic_error("[reshard] planner made no progress");
    step.group_size = axis_size(step.axis);
    const double k = double(step.group_size);
    if (step.kind == ReshardKind::kAllGather) step.bytes = s_loc * (k - 1);
    if (step.kind == ReshardKind::kAllToAll) step.bytes = s_loc * (k - 1) / k;
    step.spec_after = PartitionSpec(cur);
    step.local_after = local_shape(mesh, shape, step.spec_after);
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

void execute_reshard(const ReshardPlan& plan, MeshGroups& groups, const void* in, void* out, CommDtype dtype) {
  const size_t es = plan.elem_size;
  if (comm_dtype_size(dtype) != es)
    throw std::invalid_argument("[reshard] plan element size " + std::to_string(es) + " does not match dtype " +
                                comm_dtype_name(dtype));
  const MeshDesc& mesh = groups.mesh().desc();
  const size_t in_bytes = size_t(prod(local_shape(mesh, plan.shape, plan.src))) * es;
  if (plan.steps.empty()) {
    if (in_bytes != 0) std::memcpy(out, in, in_bytes);
    return;
  }
  // Each step reads the previous step's result and writes the next one's
  // straight into `out` on the last step; scratch is never zeroed (every byte
  // of it is written before it is read). A collective that delivers its
  // pieces in the order of the concat writes to the destination directly.
  Scratch between[2], pieces, received;
  const char* src = static_cast<const char*>(in);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const ReshardStep& s = plan.steps[i];
    const int64_t n_before = prod(s.local_before);
    char* dst = i + 1 == plan.steps.size() ? static_cast<char*>(out)
                                           : between[i % 2].get(size_t(prod(s.local_after)) * es);
    if (s.kind == ReshardKind::kPermute) {
      groups.over(groups.mesh().axis_names()).permute(src, dst, size_t(n_before), dtype, s.pairs);
      src = dst;
      continue;
    }
    Communicator& comm = groups.over({s.axis});
    const int64_t k = s.group_size;
    switch (s.kind) {
      case ReshardKind::kSlice:
        take_piece(src, s.local_before, s.dim, k, comm.rank(), es, dst);
        break;
      case ReshardKind::kAllGather:
        if (leading(s.local_before, s.dim)) {
          comm.all_gather(src, dst, size_t(n_before), dtype);
        } else {
          char* t = pieces.get(size_t(n_before * k) * es);
          comm.all_gather(src, t, size_t(n_before), dtype);
          concat_pieces(t, s.local_before, s.dim, k, es, dst);
        }
        break;
      case ReshardKind::kAllToAll: {
        // The k pieces along split_dim laid out one after another, exchanged,
        // and concatenated along dim.
        const int64_t piece = n_before / k;
        const char* send = src;
        if (!leading(s.local_before, s.split_dim)) {
          char* t = pieces.get(size_t(n_before) * es);
          for (int64_t m = 0; m < k; ++m) take_piece(src, s.local_before, s.split_dim, k, m, es, t + m * piece * es);
          send = t;
        }
        std::vector<int64_t> piece_shape = s.local_before;
        piece_shape[size_t(s.split_dim)] /= k;
        if (leading(piece_shape, s.dim)) {
          comm.all_to_all(send, dst, size_t(piece), dtype);
        } else {
          char* r = received.get(size_t(n_before) * es);
          comm.all_to_all(send, r, size_t(piece), dtype);
          concat_pieces(r, piece_shape, s.dim, k, es, dst);
        }
        break;
      }
      case ReshardKind::kPermute:
        break;  // handled above
    }
    src = dst;
  }
}

void extract_shard(const MeshDesc& mesh, const NamedShape& shape, const PartitionSpec& spec, int64_t device,
                   const void* global, void* shard, size_t es) {
  std::vector<int64_t> loc = local_shape(mesh, shape, spec), off = shard_offset(mesh, shape, spec, device);
  std::vector<int64_t> full(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) full[d] = shape[d].second;
  const int rank = int(shape.size());
  const auto* g = static_cast<const char*>(global);
  auto* o = static_cast<char*>(shard);
  if (rank == 0) {
    std::memcpy(o, g, es);
    return;
  }
  if (prod(loc) == 0) return;
  // Copy rows of the last dim; idx walks the local multi-index of the leading dims.
  const int64_t row = loc[rank - 1] * int64_t(es);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0, rows = prod(loc, 0, rank - 1); r < rows; ++r) {
    int64_t src = 0;
    for (int d = 0; d < rank; ++d) src = src * full[d] + off[d] + (d < rank - 1 ? idx[d] : 0);
    std::memcpy(o + r * row, g + src * int64_t(es), row);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < loc[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace t5x
