#include "t5x/trainer/partition_report.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "core/allocator.h"
#include "mesh/logical_axis_rules.h"
#include "mesh/simulated_communicator.h"
#include "spmd/spmd.h"
#include "t5x/trainer/trainer.h"

namespace t5x::trainer {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[partition] " + msg); }

// The counts of one run; linear in the layer counts (extrapolate_layers).
struct Counts {
  double param = 0, opt = 0, param_one = 0, opt_one = 0, peak = 0;
  std::array<double, kNumCollectives> bytes{}, calls{};
  std::map<std::string, std::array<double, kNumCollectives>> by_axes;
  Counts& axpy(double a, const Counts& x) {
    param += a * x.param, opt += a * x.opt, param_one += a * x.param_one, opt_one += a * x.opt_one;
    peak += a * x.peak;
    for (int c = 0; c < kNumCollectives; ++c) bytes[c] += a * x.bytes[c], calls[c] += a * x.calls[c];
    for (const auto& [k, b] : x.by_axes)
      for (int c = 0; c < kNumCollectives; ++c) by_axes[k][c] += a * b[c];
    return *this;
  }
};

double state_bytes(const ParamTree& params) {
  double b = 0;
  for (const auto& [k, p] : params) b += double(p.nbytes());
  return b;
}

double slot_bytes(const OptimizerState& s) {
  double b = 0;
  for (const auto& [k, a] : s.slots) b += double(a.nbytes());
  return b;
}

// The feature converter's model features, each [rows, length] of token 1
// (positions 0..length-1): a batch of full, unpadded rows.
Batch synthetic_batch(const TrainRunConfig& cfg, int64_t rows) {
  if (!cfg.train_ds.task_feature_lengths)
    fail("the training DatasetConfig has no task_feature_lengths; set TASK_FEATURE_LENGTHS");
  const auto& task = *cfg.train_ds.task_feature_lengths;
  const auto conv = make_feature_converter(cfg.model, cfg.train_ds.pack, task.count("inputs") > 0);
  Batch b;
  for (const auto& [name, len] : conv->get_model_feature_lengths(task)) {
    std::vector<int64_t> v(size_t(rows * len), 1);
    if (name.find("positions") != std::string::npos)
      for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i % size_t(len));
    b[name] = Array::from_ints(Shape{{"batch", rows}, {"length", len}}, v);
  }
  return b;
}

Counts measure(const TrainRunConfig& base, int64_t data, int64_t model, int rank, PartitionReport* info) {
  Counts c;
  auto specs = make_model(base.model)->param_specs();
  {  // One process holding everything.
    ParamTree whole;
    for (const auto& s : specs) whole[s.name] = Array(s.shape, s.dtype);
    c.param_one = state_bytes(whole);
    c.opt_one = slot_bytes(base.optimizer.optimizer->init(whole));
  }
  TrainRunConfig cfg = base;
  cfg.partitioner.num_partitions = model;
  cfg.partitioner.model_parallel_submesh.clear();
  cfg.partitioner.mesh_invariant = false;  // the one-mesh step
  auto world = std::make_shared<SimulatedCommunicator>(int(data * model), rank);
  Distributed d = Distributed::create(cfg.partitioner, world);
  Trainer t(cfg, d, {});
  const LogicalAxisRules rules = logical_axis_rules(cfg.partitioner);
  TrainState& st = t.mutable_state();
  for (const auto& s : specs) {
    const Sharding sh =
        d.spmd_active() ? spmd::context().sharding(spmd::param_spec(s.name, s.shape, rules)) : Sharding{};
    st.params[s.name] = Array(s.shape, s.dtype, sh);
  }
  st.opt = cfg.optimizer.optimizer->init(st.params);
  c.param = state_bytes(st.params);
  c.opt = slot_bytes(st.opt);
  if (cfg.train_ds.batch_size % d.num_data_shards != 0)
    fail("BATCH_SIZE = " + std::to_string(cfg.train_ds.batch_size) + " does not split over 'data' = " +
         std::to_string(d.num_data_shards));
  const int64_t rows = cfg.train_ds.batch_size / d.num_data_shards;
  const Batch batch = synthetic_batch(cfg, rows);
  reset_step_counters(d);
  reset_peak_bytes();
  const double before = double(live_bytes());
  const StepOutput out = t.train_step(batch);
  c.peak = double(peak_bytes()) - before;
  if (!out.finite)
    fail("the simulated step's loss or update was not finite (loss " + std::to_string(out.loss) +
         "): its optimizer collectives would be missing from the report");
  const CommCounters cc = step_counters(d);
  for (int k = 0; k < kNumCollectives; ++k) c.bytes[k] = cc.bytes[k], c.calls[k] = double(cc.calls[k]);
  for (const auto& [axes, g] : step_counters_by_axes(d))
    for (int k = 0; k < kNumCollectives; ++k) c.by_axes[axes][k] = g.bytes[k];
  if (info) {
    info->mesh = d.mesh->to_string();
    info->local_batch_rows = rows;
    info->layout = t.layout();
  }
  return c;
}

void subtract(CommCounters& c, const CommCounters& o) {
  for (int k = 0; k < kNumCollectives; ++k) c.bytes[k] -= o.bytes[k], c.calls[k] -= o.calls[k];
}

std::string human(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::abs(b) >= 1024 && u < 4) b /= 1024, ++u;
  char s[32];
  std::snprintf(s, sizeof s, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return s;
}

}  // namespace

CommCounters step_counters(const Distributed& d) {
  MeshGroups& g = d.spmd->groups();
  CommCounters c = g.total_counters();
  std::set<const Communicator*> seen = {&g.world()};
  // The mesh-invariant mode's replica mesh: its groups are split from d.model.
  if (d.replica) {
    MeshGroups& r = d.replica->groups();
    c += r.total_counters();
    if (!seen.insert(&r.world()).second) subtract(c, r.world().counters());
  }
  for (const auto& comm : {d.world, d.data, d.model})
    if (comm && seen.insert(comm.get()).second) c += comm->counters();
  return c;
}

std::map<std::string, CommCounters> step_counters_by_axes(const Distributed& d) {
  std::map<std::string, CommCounters> out;
  CommCounters groups;
  const Mesh& m = d.spmd->mesh();
  for (int mask = 1; mask < (1 << m.ndim()); ++mask) {  // the groups MeshGroups made up front
    std::vector<std::string> axes;
    std::string key;
    for (int a = 0; a < m.ndim(); ++a)
      if (mask & (1 << a)) axes.push_back(m.axis_names()[a]), key += (key.empty() ? "" : ",") + axes.back();
    const CommCounters& c = d.spmd->over(axes).counters();
    out[key] += c;
    groups += c;
  }
  // The rest: the world, the trainer's data and model groups, and mesh groups
  // over other axis orders (split on first use).
  CommCounters rest = step_counters(d);
  subtract(rest, groups);
  if (rest.total_bytes() > 0) out["other"] = rest;
  return out;
}

void reset_step_counters(const Distributed& d) {
  d.spmd->groups().reset_counters();
  if (d.replica) d.replica->groups().reset_counters();
  for (const auto& comm : {d.world, d.data, d.model})
    if (comm) comm->reset_counters();
}

std::vector<int64_t> parse_mesh_flag(const std::string& value) {
  int64_t data = 0, model = 0;
  std::istringstream is(value);
  for (std::string item; std::getline(is, item, ',');) {
    const auto eq = item.find('=');
    int64_t* slot = eq == std::string::npos ? nullptr
                    : item.substr(0, eq) == "data" ? &data
                    : item.substr(0, eq) == "model" ? &model : nullptr;
    try {
      if (slot) *slot = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      slot = nullptr;
    }
    if (!slot || *slot < 1)
      fail("--mesh=" + value + ": '" + item + "' is not data=N or model=N with N >= 1\n  hint: --mesh=data=256,model=8");
  }
  if (!data || !model) fail("--mesh=" + value + ": give both sizes\n  hint: --mesh=data=256,model=8");
  return {data, model};
}

PartitionReport partition_report(const TrainRunConfig& cfg, const PartitionOptions& o) {
  // The largest mesh simulated: 2^20 processes (a pod slice has thousands).
  // More hung, growing memory, or overflowed int.
  constexpr int64_t kMaxProcesses = int64_t(1) << 20;
  int64_t data = 0, model = 0;
  if (!o.mesh.empty()) {
    if (o.mesh.size() != 2) fail("the mesh needs (data, model) sizes");
    data = o.mesh[0], model = o.mesh[1];
    if (data < 1 || model < 1 || data > kMaxProcesses || model > kMaxProcesses || data * model > kMaxProcesses)
      fail("--mesh=data=" + std::to_string(data) + ",model=" + std::to_string(model) + ": at most " +
           std::to_string(kMaxProcesses) + " processes in all are simulated");
  } else {
    if (o.processes < 1)
      fail("how many processes? give --processes=N (with the gin partitioner settings) or --mesh=data=D,model=M");
    if (o.processes > kMaxProcesses)
      fail("--processes=" + std::to_string(o.processes) + ": at most " + std::to_string(kMaxProcesses) +
           " processes are simulated");
    const Mesh m = Mesh::from_partitioner(o.processes, 0, cfg.partitioner.num_partitions,
                                          cfg.partitioner.model_parallel_submesh);
    data = m.axis_sizes()[0], model = m.axis_sizes()[1];
  }
  const int64_t n = data * model;
  if (o.rank < 0 || o.rank >= n)
    fail("--rank=" + std::to_string(o.rank) + " is not a process of the " + std::to_string(n) + " of mesh (data=" +
         std::to_string(data) + ", model=" + std::to_string(model) + ")");
  PartitionReport r;
  r.processes = n;
  r.rank = o.rank;
  Counts c;
  if (!o.extrapolate_layers) {
    c = measure(cfg, data, model, o.rank, &r);
    r.how = "one step";
  } else {
    // counts(Le, Ld) = counts(1,1) + (Le-1)(counts(2,1) - counts(1,1)) + (Ld-1)(counts(1,2) - counts(1,1)).
    auto variant = [&](int64_t enc, int64_t dec, PartitionReport* info) {
      TrainRunConfig v = cfg;
      v.model.network.num_encoder_layers = enc;
      v.model.network.num_decoder_layers = dec;
      return measure(v, data, model, o.rank, info);
    };
    const Counts c11 = variant(1, 1, &r), c21 = variant(2, 1, nullptr), c12 = variant(1, 2, nullptr);
    const double le = double(cfg.model.network.num_encoder_layers - 1);
    const double ld = double(cfg.model.network.num_decoder_layers - 1);
    c.axpy(1 - le - ld, c11).axpy(le, c21).axpy(ld, c12);
    r.how = "layers extrapolated from one step each of 1+1, 2+1 and 1+2 (encoder+decoder) layers";
    r.layout.clear();
  }
  r.param_bytes = c.param, r.optimizer_bytes = c.opt, r.param_bytes_one = c.param_one, r.optimizer_bytes_one = c.opt_one;
  r.step_peak_bytes = c.peak;
  for (int k = 0; k < kNumCollectives; ++k) {
    r.step.bytes[k] = c.bytes[k];
    r.step.calls[k] = int64_t(std::llround(c.calls[k]));
  }
  for (const auto& [axes, b] : c.by_axes) r.step_by_axes[axes].bytes = b;
  return r;
}

std::string PartitionReport::to_string() const {
  std::ostringstream os;
  char line[256];
  os << "partition report: process " << rank << " of " << processes << " on mesh " << mesh << " ("
     << local_batch_rows << " batch rows per data shard; " << how << ")\n";
  auto row = [&](const char* what, double b, double one) {
    std::snprintf(line, sizeof line, "  %-26s %18.0f B  %12s  (%.2f%% of one process's %s)\n", what, b,
                  human(b).c_str(), one > 0 ? 100 * b / one : 0.0, human(one).c_str());
    os << line;
  };
  row("parameters", param_bytes, param_bytes_one);
  row("optimizer state", optimizer_bytes, optimizer_bytes_one);
  row("parameters + optimizer", param_bytes + optimizer_bytes, param_bytes_one + optimizer_bytes_one);
  std::snprintf(line, sizeof line, "  %-26s %18.0f B  %12s  (peak live buffers of the step above the state)\n",
                "step peak (activations...)", step_peak_bytes, human(step_peak_bytes).c_str());
  os << line << "  communication per training step (bytes this process sends, ring model):\n";
  for (int k = 0; k < kNumCollectives; ++k) {
    std::snprintf(line, sizeof line, "    %-16s %18.0f B  %12s  %8lld calls\n", collective_name(Collective(k)),
                  step.bytes[k], human(step.bytes[k]).c_str(), (long long)step.calls[k]);
    os << line;
  }
  std::snprintf(line, sizeof line, "    %-16s %18.0f B  %12s\n", "total", step.total_bytes(),
                human(step.total_bytes()).c_str());
  os << line << "  by the mesh axes of the sending group:\n";
  for (const auto& [axes, c] : step_by_axes) {
    if (c.total_bytes() == 0) continue;
    os << "    over " << axes << ":";
    for (int k = 0; k < kNumCollectives; ++k)
      if (c.bytes[k] > 0) os << " " << collective_name(Collective(k)) << " " << human(c.bytes[k]);
    os << "\n";
  }
  return os.str();
}

}  // namespace t5x::trainer
