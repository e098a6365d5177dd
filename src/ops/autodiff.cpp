#include "ops/autodiff.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include <atomic>

#include "ops/detail.h"
#include "ops/elementwise.h"
#include "ops/lowering.h"
#include "ops/primitive.h"
#include "ops/profile.h"

namespace t5x {

namespace {
// Exclusive-time op profiler (ops/profile.h).
struct OpProfile {
  std::mutex mu;
  std::map<std::string, std::pair<double, int64_t>> acc;  // "name/pass" -> (seconds, calls)
};
OpProfile& op_profile() {
  static OpProfile p;
  return p;
}
bool env_profile_on() {
  const char* e = std::getenv("T5X_OP_PROFILE");
  return e && *e && std::string(e) != "0";
}
bool g_profile_on = env_profile_on();
thread_local double t_child_seconds = 0;  // time of nested ops inside the current one

class ProfileScope {
 public:
  ProfileScope(const char* name, const char* pass) : name_(name), pass_(pass) {
    if (!g_profile_on) return;
    saved_child_ = t_child_seconds;
    t_child_seconds = 0;
    t0_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (!g_profile_on || !name_) return;
    double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    double self = total - t_child_seconds;
    t_child_seconds = saved_child_ + total;
    auto& p = op_profile();
    std::lock_guard<std::mutex> l(p.mu);
    auto& a = p.acc[std::string(name_) + "/" + pass_];
    a.first += self;
    a.second += 1;
  }

 private:
  const char* name_;
  const char* pass_;
  double saved_child_ = 0;
  std::chrono::steady_clock::time_point t0_;
};
}  // namespace

void op_profile_enable(bool on) { g_profile_on = on; }
bool op_profile_enabled() { return g_profile_on; }
void op_profile_add(const std::string& key, double seconds) {
  if (!g_profile_on) return;
  std::lock_guard<std::mutex> l(op_profile().mu);
  auto& a = op_profile().acc[key];
  a.first += seconds;
  a.second += 1;
}
void op_profile_reset() {
  std::lock_guard<std::mutex> l(op_profile().mu);
  op_profile().acc.clear();
}
std::string op_profile_report() {
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> v;
  {
    std::lock_guard<std::mutex> l(op_profile().mu);
    v.assign(op_profile().acc.begin(), op_profile().acc.end());
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string out;
  char buf[256];
  for (const auto& [k, t] : v) {
    std::snprintf(buf, sizeof buf, "%10.2f ms %8lld  %s\n", t.first * 1e3, (long long)t.second, k.c_str());
    out += buf;
  }
  return out;
}

namespace {

struct Node {
  std::shared_ptr<Primitive> prim;
  std::vector<Array> inputs, outputs;  // saved values (null when not needed)
  std::vector<int64_t> in_slots;       // -1: input not tracked
  std::vector<int64_t> out_slots;      // -1: output not differentiable
  std::vector<Shape> in_shapes, out_shapes;
  std::vector<DType> in_dtypes, out_dtypes;
};

struct Tape {
  uint64_t gen = 0;
  std::vector<Node> nodes;
  int64_t num_slots = 0;
};

std::atomic<uint64_t> g_next_gen{1};
thread_local Tape* t_tape = nullptr;
thread_local bool t_paused = false;

bool tracked_on(const Array& a, const Tape* t) { return a.valid() && t && a.impl().tag.tape == t->gen; }

// Makes `t` the recording tape of this thread for the scope's lifetime.
class TapeScope {
 public:
  explicit TapeScope(Tape* t) : prev_tape_(t_tape), prev_paused_(t_paused) {
    t_tape = t;
    t_paused = false;
  }
  ~TapeScope() { restore(); }
  void restore() {
    t_tape = prev_tape_;
    t_paused = prev_paused_;
  }

 private:
  Tape* prev_tape_;
  bool prev_paused_;
};

// Pauses recording; restores the previous state even when an exception unwinds.
struct PauseScope {
  bool prev = t_paused;
  PauseScope() { t_paused = true; }
  ~PauseScope() { t_paused = prev; }
};

Array track(Tape& t, const Array& x) {
  Array a = x.alias();
  a.impl().tag = {t.gen, t.num_slots++};
  return a;
}

// A cotangent has its value's dtype, or float32 for a bfloat16 value (wide).
bool cotangent_dtype_ok(DType got, DType value) {
  return got == value || (value == DType::bf16 && got == DType::f32);
}

// c += g; a wide and a narrow cotangent add in float32.
void accumulate(Array& c, const Array& g) {
  if (!c.valid()) {
    c = g;
    return;
  }
  if (c.dtype() == g.dtype()) add_into(c, g);
  else c = add(cast(c, DType::f32), cast(g, DType::f32));
}

// The gradient handed back to a caller has the primal's dtype.
Array in_dtype(const Array& c, DType dt) { return c.dtype() == dt ? c : cast(c, dt); }

// Walks the tape backwards. `cot` is indexed by slot and seeded by the caller.
void backward(Tape& t, std::vector<Array>& cot) {
  PauseScope pause;  // ops inside vjps are not recorded (first-order autodiff)
  for (size_t i = t.nodes.size(); i-- > 0;) {
    Node n = std::move(t.nodes[i]);
    t.nodes[i] = Node{};
    bool any = false;
    for (int64_t s : n.out_slots)
      if (s >= 0 && cot[size_t(s)].valid()) any = true;
    if (!any) continue;
    std::vector<Array> cots(n.out_slots.size());
    for (size_t j = 0; j < n.out_slots.size(); ++j) {
      int64_t s = n.out_slots[j];
      if (s >= 0 && cot[size_t(s)].valid()) {
        cots[j] = std::move(cot[size_t(s)]);
        cot[size_t(s)] = Array();
      } else if (is_floating(n.out_dtypes[j])) {
        cots[j] = Array::zeros(n.out_shapes[j], n.out_dtypes[j]);
      }
    }
    if (!n.prim->accepts_wide_cotangents())
      for (size_t j = 0; j < cots.size(); ++j)
        if (cots[j].valid() && cots[j].dtype() != n.out_dtypes[j]) cots[j] = cast(cots[j], n.out_dtypes[j]);
    std::vector<bool> needs(n.in_slots.size());
    for (size_t j = 0; j < needs.size(); ++j) needs[j] = n.in_slots[j] >= 0;
    std::vector<Array> g;
    {
      ProfileScope prof(n.prim->name(), "vjp");
      // An input whose cotangent so far the primitive adds to in place (a
      // shared embedding's second take: no second dense gradient, no add).
      for (size_t j = 0; j < needs.size(); ++j) {
        Array* acc = needs[j] ? &cot[size_t(n.in_slots[j])] : nullptr;
        if (acc && acc->valid() && acc->dtype() == DType::f32 && acc->shape() == n.in_shapes[j] &&
            n.prim->vjp_into(n.inputs, cots, j, *acc))
          needs[j] = false;
      }
      g = n.prim->vjp(n.inputs, n.outputs, cots, needs);
    }
    // Release the saved activations of this node before accumulating.
    n.inputs.clear();
    n.outputs.clear();
    cots.clear();
    n.prim.reset();
    for (size_t j = 0; j < n.in_slots.size() && j < g.size(); ++j) {
      int64_t s = n.in_slots[j];
      if (s < 0 || !g[j].valid()) continue;
      if (g[j].shape() != n.in_shapes[j] || !cotangent_dtype_ok(g[j].dtype(), n.in_dtypes[j]))
        throw std::logic_error("[autodiff] vjp returned " + std::string(dtype_name(g[j].dtype())) +
                               g[j].shape().to_string() + " for an input of " + dtype_name(n.in_dtypes[j]) +
                               n.in_shapes[j].to_string());
      accumulate(cot[size_t(s)], g[j]);
    }
  }
  t.nodes.clear();
}

class Remat : public Primitive {
 public:
  explicit Remat(ArrayFn fn) : fn_(std::move(fn)) {}
  const char* name() const override { return "checkpoint"; }
  bool accepts_split_inputs() const override { return true; }  // the block's ops lower themselves
  // The block's ops pick their own device.
  std::vector<Array> eval_cpu(const std::vector<Array>& inputs) override {
    NoGradGuard g;
    return fn_(inputs);
  }
  std::vector<Array> eval_cuda(const std::vector<Array>& inputs) override { return eval_cpu(inputs); }
  std::vector<Array> vjp(const std::vector<Array>& inputs, const std::vector<Array>&,
                         const std::vector<Array>& cotangents, const std::vector<bool>& needs) override {
    std::vector<Array> grads = t5x::vjp(fn_, inputs, cotangents).second;
    for (size_t i = 0; i < grads.size(); ++i)
      if (!needs[i]) grads[i] = Array();
    return grads;
  }

 private:
  ArrayFn fn_;
};

// The device of an op's inputs (the CPU when none is valid); throws
// "[op] inputs on different devices: cpu:0 and cuda:0; ..." when they differ.
DeviceKind device_of(const char* op, const std::vector<Array>& inputs) {
  const Device* first = nullptr;
  for (const Array& in : inputs) {
    if (!in.valid()) continue;
    if (!first) first = &in.device();
    else if (!(in.device() == *first))
      throw_invalid(op, "inputs on different devices: " + first->to_string() + " and " + in.device().to_string() +
                            "; copy them to one device first");
  }
  return first ? first->kind : DeviceKind::cpu;
}

std::vector<Array> eval_on(DeviceKind device, Primitive& p, const std::vector<Array>& inputs) {
  switch (device) {
    case DeviceKind::cuda: return p.eval_cuda(inputs);
    case DeviceKind::cpu: break;
  }
  return p.eval_cpu(inputs);
}

}  // namespace

std::vector<Array> Primitive::eval_cuda(const std::vector<Array>& inputs) { detail::no_cuda_kernel(name(), inputs); }
bool Primitive::vjp_into(const std::vector<Array>&, const std::vector<Array>&, size_t, Array&) { return false; }

std::vector<Array> apply(std::shared_ptr<Primitive> p, const std::vector<Array>& inputs) {
  // The sharded rule (ops/lowering.h): the lowering's ops run on local shards
  // and record themselves, so neither p nor its outputs are recorded here.
  if (!p->accepts_split_inputs()) {
    bool split = false;
    for (const Array& in : inputs) split = split || (in.valid() && !in.is_fully_local());
    if (split) {
      if (const ShardedLowering* l = sharded_lowering()) return p->lower(*l, inputs);
      detail::check_local(p->name(), inputs);  // throws
    }
  }
  const DeviceKind device = device_of(p->name(), inputs);
  if (p->is_composite()) return eval_on(device, *p, inputs);  // its ops record themselves
  std::vector<Array> outs;
  {
    NoGradGuard inner;  // ops used inside the eval are not recorded separately
    ProfileScope prof(p->name(), "fwd");
    outs = eval_on(device, *p, inputs);
  }
  Tape* t = t_paused ? nullptr : t_tape;
  if (!t) return outs;
  bool any = false;
  for (const Array& in : inputs)
    if (tracked_on(in, t)) any = true;
  if (!any) return outs;
  Node n;
  for (const Array& in : inputs) {
    n.in_slots.push_back(tracked_on(in, t) ? in.impl().tag.slot : -1);
    n.in_shapes.push_back(in.valid() ? in.shape() : Shape());
    n.in_dtypes.push_back(in.valid() ? in.dtype() : DType::f32);
  }
  if (p->saves_inputs()) n.inputs = inputs;
  else n.inputs.resize(inputs.size());
  for (Array& o : outs) {
    n.out_shapes.push_back(o.shape());
    n.out_dtypes.push_back(o.dtype());
    if (is_floating(o.dtype())) {
      o = track(*t, o);  // fresh handle, even when forward passed an input through
      n.out_slots.push_back(o.impl().tag.slot);
    } else {
      n.out_slots.push_back(-1);
    }
  }
  if (p->saves_outputs()) n.outputs = outs;
  else n.outputs.resize(outs.size());
  n.prim = std::move(p);
  t->nodes.push_back(std::move(n));
  return outs;
}

Array apply1(std::shared_ptr<Primitive> p, const std::vector<Array>& inputs) { return t5x::apply(std::move(p), inputs)[0]; }

bool is_recording() { return t_tape != nullptr && !t_paused; }

NoGradGuard::NoGradGuard() : prev_(t_paused) { t_paused = true; }
NoGradGuard::~NoGradGuard() { t_paused = prev_; }

Array stop_gradient(const Array& x) { return x.alias(); }

ArrayFn checkpoint(ArrayFn fn) {
  return [fn = std::move(fn)](const std::vector<Array>& xs) { return t5x::apply(std::make_shared<Remat>(fn), xs); };
}

std::pair<std::vector<Array>, std::vector<Array>> vjp(const ArrayFn& fn, const std::vector<Array>& primals,
                                                      const std::vector<Array>& cotangents) {
  Tape tape;
  tape.gen = g_next_gen.fetch_add(1);
  std::vector<Array> outs;
  std::vector<Array> leaves;
  {
    TapeScope scope(&tape);
    for (const Array& p : primals) leaves.push_back(p.valid() && is_floating(p.dtype()) ? track(tape, p) : p);
    outs = fn(leaves);
  }
  if (cotangents.size() != outs.size())
    throw_invalid("vjp", "got " + std::to_string(cotangents.size()) + " cotangents for " +
                             std::to_string(outs.size()) + " outputs");
  std::vector<Array> cot(size_t(tape.num_slots));
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!cotangents[i].valid() || !tracked_on(outs[i], &tape)) continue;
    if (cotangents[i].shape() != outs[i].shape())
      throw_invalid("vjp", "cotangent " + cotangents[i].shape().to_string() + " for output " +
                               outs[i].shape().to_string());
    Array& c = cot[size_t(outs[i].impl().tag.slot)];
    c = c.valid() ? add(c, cotangents[i]) : cotangents[i];
  }
  backward(tape, cot);
  std::vector<Array> grads(primals.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!tracked_on(leaves[i], &tape)) continue;
    Array& c = cot[size_t(leaves[i].impl().tag.slot)];
    grads[i] = c.valid() ? in_dtype(c, primals[i].dtype()) : Array::zeros(primals[i].shape(), primals[i].dtype());
  }
  for (Array& o : outs) o = o.alias();
  return {outs, grads};
}

ValueAuxAndGrad value_and_grad_with_aux(const std::function<std::pair<Array, ParamTree>(const ParamTree&)>& fn,
                                        const ParamTree& params) {
  Tape tape;
  tape.gen = g_next_gen.fetch_add(1);
  ParamTree tracked;
  std::pair<Array, ParamTree> res;
  {
    TapeScope scope(&tape);
    for (const auto& [k, p] : params) tracked[k] = is_floating(p.dtype()) ? track(tape, p) : p;
    res = fn(tracked);
  }
  const Array& loss = res.first;
  if (!loss.valid() || loss.rank() != 0 || !is_floating(loss.dtype()))
    throw_invalid("value_and_grad", "loss must be a scalar floating array, got " +
                                        (loss.valid() ? std::string(dtype_name(loss.dtype())) + loss.shape().to_string()
                                                      : std::string("a null array")));
  std::vector<Array> cot(size_t(tape.num_slots));
  if (tracked_on(loss, &tape)) cot[size_t(loss.impl().tag.slot)] = Array::ones(Shape{}, loss.dtype());
  backward(tape, cot);
  ValueAuxAndGrad out;
  out.value = loss.alias();
  for (auto& [k, a] : res.second) out.aux[k] = a.alias();
  for (const auto& [k, p] : tracked) {
    if (!tracked_on(p, &tape)) continue;
    Array& c = cot[size_t(p.impl().tag.slot)];
    out.grads[k] = c.valid() ? in_dtype(c, p.dtype()) : Array::zeros(p.shape(), p.dtype());
  }
  return out;
}

ValueAndGrad value_and_grad(const std::function<Array(const ParamTree&)>& fn, const ParamTree& params) {
  auto r = value_and_grad_with_aux([&](const ParamTree& p) { return std::make_pair(fn(p), ParamTree{}); }, params);
  return {r.value, r.grads};
}

void accumulate_grads(ParamTree& accum, const ParamTree& grads) {
  NoGradGuard g;
  for (const auto& [k, v] : grads) {
    auto it = accum.find(k);
    if (it == accum.end()) accum[k] = v.copy();
    else it->second = add(it->second, v);
  }
}

}  // namespace t5x
