#include "t5x/trainer/train_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "backend/kernels.h"
#include "core/dtype_bf16.h"
#include "mesh/partition_spec.h"
#include "nn/params.h"
#include "spmd/spmd.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/tf_bundle.h"
#include "t5x/checkpoints/upcycle.h"

namespace t5x::trainer {

namespace fs = std::filesystem;

namespace {

DType dtype_from_numpy(const std::string& n) {
  if (n == "float32") return DType::f32;
  if (n == "bfloat16") return DType::bf16;
  if (n == "float16") return DType::f16;
  if (n == "int32") return DType::i32;
  if (n == "int64") return DType::i64;
  if (n == "bool") return DType::boolean;
  throw CheckpointError("[checkpoint] cannot load dtype '" + n + "' into an array");
}

// Slots with any named (non-"") axis shard like their parameter.
bool is_partitioned(const std::vector<std::string>& axes) {
  for (const auto& a : axes)
    if (!a.empty()) return true;
  return false;
}

// read_expect for a parameter, with a hint when a key / value kernel differs
// only in being grouped ([embed, kv_heads, kv]) or multi-head ([embed,
// joined_kv]): the model's num_kv_heads binding does not match the checkpoint.
HostTensor read_param(const CheckpointReader& reader, const ParamLayout& layout, const std::string& path,
                      const Array& like, std::string_view cast) {
  const std::vector<int64_t> want = like.shape().sizes();
  try {
    return layout.read(reader, path, want, shard_box(like), cast);
  } catch (const CheckpointError& e) {
    // Another layout (scalable_t5's stacked or split heads): its hint, not grouped-query attention's.
    if (const std::string h = layout.hint(reader, path); !h.empty()) {
      if (std::string(e.what()).find(h) != std::string::npos) throw;
      throw CheckpointError(std::string(e.what()) + "\n  hint: " + h);
    }
    const bool kv = path.ends_with("/key/kernel") || path.ends_with("/value/kernel");
    if (!kv || !reader.has(path)) throw;
    const std::vector<int64_t> have = reader.info(path).shape;
    const std::string param = path.rfind("target/encoder/", 0) == 0 ? "network.T5Config.encoder_num_kv_heads"
                                                                      : "network.T5Config.num_kv_heads";
    const std::string other =
        path.rfind("target/encoder/", 0) == 0 ? "" : " (network.TransformerConfig.num_kv_heads for a decoder-only model)";
    std::string hint;
    if (have.size() == 3 && (want.size() == 2 || want.size() == 3))
      hint = "the checkpoint's key / value kernels are grouped with kv_heads = " + std::to_string(have[1]) +
             "; bind " + param + " = " + std::to_string(have[1]) + other;
    else if (have.size() == 2 && want.size() == 3)
      hint = "the checkpoint's key / value kernels are multi-head; leave " + param +
             " unbound (None)" + other + ", or convert the checkpoint with `t5x ckpt convert-gqa --num_kv_heads=" +
             std::to_string(want[1]) + "`";
    else
      throw;
    throw CheckpointError(std::string(e.what()) + "\n  hint: " + hint);
  }
}

}  // namespace

HostTensor to_host(const Array& a) {
  HostTensor t = HostTensor::zeros(dtype_name(a.dtype()), a.local_shape().sizes());
  if (!t.data.empty()) std::memcpy(t.data.data(), a.raw_data(), t.data.size());
  return t;
}

std::optional<IndexBox> shard_box(const Array& a) {
  if (a.is_fully_local()) return std::nullopt;
  const Sharding& sh = a.sharding();
  NamedShape ns;
  for (const auto& d : a.shape().dims()) ns.emplace_back(d.name, d.size);
  IndexBox b;
  b.start = shard_offset(*sh.mesh, ns, sh.spec, sh.mesh->device_id);
  const auto ext = a.local_shape().sizes();
  for (size_t i = 0; i < ext.size(); ++i) b.stop.push_back(b.start[i] + ext[i]);
  return b;
}

Array from_host(const HostTensor& t, const Array& like) {
  if (t.shape != like.local_shape().sizes())
    throw CheckpointError("[checkpoint] shape " + t.shape_string() + " does not match expected " +
                          like.local_shape().to_string() +
                          (like.is_fully_local() ? std::string() : " (the local shard of " + like.shape().to_string() + ")"));
  const DType want = like.dtype();
  const DType have = dtype_from_numpy(t.dtype);
  if (have == want) {
    Array a(like.shape(), want, like.sharding(), {}, false);
    if (!t.data.empty()) std::memcpy(a.raw_data(), t.data.data(), t.data.size());
    return a;
  }
  if (is_floating(have) && is_floating(want)) return from_host(cast_host_tensor(t, dtype_name(want)), like);
  // Integer counters (e.g. a step stored as int64).
  std::vector<int64_t> vals;
  if (t.dtype == "int32") for (auto v : t.values<int32_t>()) vals.push_back(v);
  else if (t.dtype == "int64") vals = t.values<int64_t>();
  else throw CheckpointError("[checkpoint] cannot convert " + t.dtype + " to " + dtype_name(want));
  return Array::from_ints(like.shape(), vals, want);
}

std::string save_train_state(const std::string& model_dir, const TrainState& state, const SaveCheckpointConfig& cfg,
                             const std::optional<std::string>& data_state_json, const SaveContext& ctx,
                             const ParamLayout& layout) {
  auto dict = state_dict(state.params, state.opt);
  auto axes = state_dict_logical_axes(state.params, state.opt);
  std::vector<SaveLeaf> leaves;
  leaves.reserve(dict.size());
  for (const auto& [path, arr] : dict) {
    HostTensor h = to_host(arr);
    auto it = axes.find(path);
    const bool part = it != axes.end() && is_partitioned(it->second) && arr.rank() > 0;
    if (auto box = shard_box(arr)) {
      const Sharding& sh = arr.sharding();
      const bool write = ctx.data_replica == 0 && replica_id(*sh.mesh, sh.spec, sh.mesh->device_id) == 0;
      leaves.push_back(SaveLeaf::sharded(path, std::move(h), arr.shape().sizes(), *box, write));
    } else if (part) {
      auto shape = h.shape;
      leaves.push_back(SaveLeaf::sharded(path, std::move(h), shape, IndexBox::full(shape), ctx.process_index == 0));
    } else {
      leaves.push_back(SaveLeaf::inline_array(path, std::move(h)));
    }
  }
  leaves = layout.to_checkpoint(std::move(leaves));
  SaveOptions o;
  o.save_dtype = cfg.dtype;
  o.process_index = ctx.process_index;
  o.process_count = ctx.process_count;
  o.barrier = ctx.barrier;
  o.timestamp = ctx.timestamp;
  o.durable = ctx.durable;
  o.dataset_state_json = data_state_json;
  o.keep = cfg.keep;
  return save_checkpoint(model_dir, state.step(), leaves, o).dir;
}

RestoreResult restore_train_state(const std::string& ckpt_dir, TrainState& state, bool with_optimizer,
                                  const std::string& dtype, int process_index, int process_count,
                                  const ParamLayout& layout) {
  RestoreResult r;
  CheckpointReader reader = CheckpointReader::open(ckpt_dir);
  r.dir = reader.dir();
  const std::string cast = (dtype == "bfloat16" || dtype == "float16") ? dtype : "";
  // Parameters: all required.
  ParamTree params;
  for (const auto& [name, arr] : state.params) {
    const std::string path = "target/" + name;
    if (!layout.has(reader, path)) {
      const std::string h = layout.hint(reader, path);
      throw CheckpointError("[checkpoint] " + r.dir + " has no parameter '" + name + "'\n  hint: " +
                            (h.empty() ? "the checkpoint belongs to another model; check the model gin file" : h));
    }
    params[name] = from_host(read_param(reader, layout, path, arr, cast), arr);
  }
  const std::vector<std::string> in_ckpt = layout.model_paths(reader.array_paths());
  for (const auto& p : in_ckpt)
    if (p.rfind("target/", 0) == 0 && !state.params.count(p.substr(7))) r.unused_params.push_back(p.substr(7));
  // Optimizer slots and step: all or nothing.
  bool have_all = with_optimizer && reader.has("state/step");
  if (have_all)
    for (const auto& [k, v] : state.opt.slots)
      if (!layout.has(reader, "state/param_states/" + k)) {
        have_all = false;
        r.missing_slot = k;
        break;
      }
  if (with_optimizer)
    for (const auto& p : in_ckpt)
      if (p.rfind("state/param_states/", 0) == 0) {
        if (!have_all) r.checkpoint_slots.push_back(p.substr(19));
        if (!state.opt.slots.count(p.substr(19))) r.unused_slots.push_back(p.substr(19));
      }
  if (have_all) {
    std::map<std::string, Array> dict;
    for (const auto& [k, v] : state.opt.slots) {
      const std::string path = "state/param_states/" + k;
      try {
        dict[path] = from_host(layout.read(reader, path, v.shape().sizes(), shard_box(v)), v);
      } catch (const CheckpointError&) {
        // Same slot names, other shapes: the optimizer's settings changed
        // between runs (Adafactor keeps unused slots as [1] zeros, so
        // factored, min_dim_size_to_factor and beta1 decide the shapes).
        if (!reader.has(path)) throw;  // stored in another layout: its own message
        const std::vector<int64_t> have = reader.info(path).shape;
        if (have == v.shape().sizes()) throw;
        auto dims = [](const std::vector<int64_t>& s) {
          HostTensor t;
          t.shape = s;
          return t.shape_string();
        };
        throw CheckpointError(
            "[checkpoint] " + r.dir + ": optimizer slot '" + path + "' is " + dims(have) + " in the checkpoint but " +
            dims(v.shape().sizes()) +
            " for this run's optimizer: its settings differ from those of the run that saved it\n"
            "  hint: resume with the optimizer settings the run was trained with (Adafactor: factored, "
            "min_dim_size_to_factor, beta1, factor_map); to change them, fine-tune from the checkpoint in a fresh "
            "MODEL_DIR (INITIAL_CHECKPOINT_PATH) with utils.RestoreCheckpointConfig.assignment_map = "
            "((r'state/param_states/.*', None), (r'state/step', None)) and strict = False, which starts a new "
            "optimizer state");
      }
    }
    for (const auto& [name, arr] : params) dict["target/" + name] = arr;
    dict["state/step"] = Array::from_ints(Shape{}, {reader.step().value_or(0)}, DType::i32);
    Status st = load_state_dict(dict, state.params, state.opt);
    if (!st.ok()) throw CheckpointError(st.message());
    r.optimizer_restored = true;
  } else {
    for (auto& [name, arr] : state.params) arr = params.at(name);
    if (with_optimizer && reader.step()) state.opt.step = *reader.step();
  }
  r.data_state_json = reader.dataset_state(process_index, process_count);
  r.data_state_process_count = process_count;
  if (!r.data_state_json) {
    // Every process reads the whole global stream and keeps its rows, so the
    // position is the same for any process count: take process 0's of another.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(r.dir, ec)) {
      const std::string f = e.path().filename().string();
      int p = -1, n = 0;
      if (std::sscanf(f.c_str(), "train_ds-%d-of-%d.json", &p, &n) != 2 || p != 0 || n < 1) continue;
      if ((r.data_state_json = reader.dataset_state(0, n))) {
        r.data_state_process_count = n;
        break;
      }
    }
  }
  return r;
}

ParamLayout checkpoint_layout(const BaseTransformerModel& model, const Optimizer* opt) {
  const T5Config& c = model.config();
  if (!c.scalable_checkpoint.on) return {};
  std::vector<LayoutParam> params;
  for (const auto& spec : model.param_specs()) params.push_back({spec.name, spec.shape.sizes(), spec.shape.names()});
  SlotDimsFn slots;
  if (opt)
    slots = [opt](const std::string& name, const std::vector<int64_t>& shape, const std::vector<std::string>& axes) {
      std::vector<Dim> dims;
      for (size_t d = 0; d < shape.size(); ++d) dims.push_back({axes[d], shape[d]});
      return opt->slot_dims(name, Shape(dims));
    };
  return ParamLayout::scalable_t5(params, {c.scalable_checkpoint.scan_layers, c.scalable_checkpoint.param_scan_axis,
                                           c.head_dim},
                                  slots);
}

nn::ParamSpecs checkpoint_param_specs(const nn::ParamSpecs& specs, const ParamLayout& layout) {
  if (layout.identity()) return specs;
  std::vector<LayoutParam> params;
  std::map<std::string, DType> dtypes;
  for (const auto& s : specs) {
    params.push_back({s.name, s.shape.sizes(), s.shape.names()});
    dtypes[s.name] = s.dtype;
  }
  nn::ParamSpecs out;
  for (const auto& p : layout.checkpoint_params(params)) {
    nn::ParamSpec s;
    s.name = p.name;
    std::vector<Dim> dims;
    for (size_t d = 0; d < p.shape.size(); ++d) dims.push_back({p.axes[d], p.shape[d]});
    s.shape = Shape(dims);
    s.dtype = dtypes.count(p.name) ? dtypes.at(p.name) : DType::f32;  // a stacked parameter: float32, as every one
    out.push_back(std::move(s));
  }
  return out;
}

void check_param_memory(const nn::ParamSpecs& specs, int process_count) {
  // In doubles: an absurd size (num_heads = 2^31) must not overflow here.
  double elems = 0, bytes = 0, largest = 0;
  std::string largest_name;
  for (const auto& spec : specs) {
    double e = 1;
    for (int i = 0; i < spec.shape.rank(); ++i) e *= double(spec.shape[i].size);
    elems += e;
    bytes += e * double(dtype_size(spec.dtype));
    if (e > largest) {
      largest = e;
      largest_name = spec.name;
    }
  }
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  const double per_process = bytes / double(std::max(process_count, 1));
  if (memory <= 0 || per_process <= memory) return;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "[model] the parameters alone (%.4g of them, %.1f GiB; %.1f GiB a process over %d process(es)) "
                "exceed this machine's memory (%.1f GiB); the largest is %s (%.4g values)\n  hint: check the "
                "model's sizes in the gin (network.T5Config.num_heads, emb_dim, mlp_dim, vocab_size, ...)",
                elems, bytes / 1073741824.0, per_process / 1073741824.0, process_count, memory / 1073741824.0,
                largest_name.c_str(), largest);
  throw std::invalid_argument(buf);
}

ParamTree init_params_on_mesh(const BaseTransformerModel& model, const PRNGKey& key, const LogicalAxisRules& rules) {
  ParamTree params;
  for (const auto& spec : model.param_specs())
    for (auto& [k, v] : nn::init_params({spec}, key))
      params[k] = spmd::shard(v, spmd::param_spec(k, v.shape(), rules));
  return params;
}

std::string check_unused_params(const RestoreResult& r, bool strict, const std::string& who,
                                const std::string& hint) {
  if (r.unused_params.empty()) return "";
  const std::string n = std::to_string(r.unused_params.size());
  if (strict)
    throw CheckpointError("[" + who + "] " + r.dir + " holds " + n + " parameter(s) this model does not have (e.g. '" +
                          r.unused_params.front() + "'): it was saved by a larger model\n  hint: " + hint);
  return "warning: " + r.dir + ": " + n + " parameter(s) of the checkpoint are not in this model (e.g. '" +
         r.unused_params.front() + "'); dropped (utils.RestoreCheckpointConfig.strict = False)";
}

RestoreResult restore_initial_state(const std::string& ckpt_dir, TrainState& state,
                                    const RestoreCheckpointConfig& cfg, int process_index, int process_count,
                                    const ParamLayout& layout) {
  if (cfg.assignment_map.empty() && cfg.strict && !cfg.fallback_to_scratch && cfg.upcycle_num_experts == 0)
    return restore_train_state(ckpt_dir, state, true, cfg.dtype, process_index, process_count, layout);
  RestoreResult r;
  CheckpointReader reader = CheckpointReader::open(ckpt_dir);
  r.dir = reader.dir();
  const std::string cast = (cfg.dtype == "bfloat16" || cfg.dtype == "float16") ? cfg.dtype : "";
  std::vector<std::string> targets;
  for (const auto& [name, arr] : state.params) targets.push_back("target/" + name);
  targets.push_back("state/step");
  for (const auto& [k, v] : state.opt.slots) targets.push_back("state/param_states/" + k);
  std::vector<std::string> in_ckpt = layout.model_paths(reader.array_paths());
  if (reader.has("state/step") && std::find(in_ckpt.begin(), in_ckpt.end(), "state/step") == in_ckpt.end())
    in_ckpt.push_back("state/step");
  RestoreOptions opt;
  opt.strict = cfg.strict;
  opt.fallback_to_scratch = cfg.fallback_to_scratch;
  std::vector<RestoreEntry> plan;
  try {
    plan = plan_restore(targets, in_ckpt, cfg.assignment_map, opt);
  } catch (const CheckpointError& e) {
    throw CheckpointError("[checkpoint] " + r.dir + ": " + e.what() +
                          "\n  hint: see utils.RestoreCheckpointConfig assignment_map / strict / fallback_to_scratch");
  }
  size_t slots_restored = 0;
  for (const RestoreEntry& e : plan) {
    if (!e.checkpoint_path) continue;
    const std::string& src = *e.checkpoint_path;
    if (e.target_path == "state/step") {
      if (src != "state/step")
        throw CheckpointError("[checkpoint] assignment_map maps state/step to " + src +
                              "; the step can only come from state/step or be skipped (None)");
      state.opt.step = reader.step().value_or(0);
    } else if (e.target_path.rfind("target/", 0) == 0) {
      Array& dst = state.params.at(e.target_path.substr(7));
      if (cfg.upcycle_num_experts > 0 && upcycle_applies(e.target_path, dst.shape().sizes(), src,
                                                         reader.info(src).shape, cfg.upcycle_num_experts)) {
        // UpcycleCheckpointer: this process's experts are copies of the dense array's matching slice.
        std::optional<IndexBox> box = shard_box(dst), inner;
        int64_t local_experts = dst.shape().sizes()[0];
        if (box) {
          local_experts = box->stop[0] - box->start[0];
          inner = IndexBox{{box->start.begin() + 1, box->start.end()}, {box->stop.begin() + 1, box->stop.end()}};
        }
        dst = from_host(stack_experts(reader.read(src, inner, cast), local_experts), dst);
        continue;
      }
      dst = from_host(read_param(reader, layout, src, dst, cast), dst);
    } else {
      Array& dst = state.opt.slots.at(e.target_path.substr(std::string("state/param_states/").size()));
      dst = from_host(layout.read(reader, src, dst.shape().sizes(), shard_box(dst)), dst);
      ++slots_restored;
    }
  }
  r.optimizer_restored = !state.opt.slots.empty() && slots_restored == state.opt.slots.size();
  r.data_state_process_count = process_count;
  (void)process_index;
  return r;
}

std::optional<std::string> resolve_restore_path(const RestoreCheckpointConfig& cfg) {
  for (auto it = cfg.paths.rbegin(); it != cfg.paths.rend(); ++it) {
    const std::string& p = *it;
    if (p.empty()) continue;
    // A TensorFlow (Mesh-TF) checkpoint prefix, or a directory whose TF
    // `checkpoint` state file names the newest one (before the t5x test below:
    // both call their file `checkpoint`).
    if (auto prefix = tf::tf_checkpoint_prefix(p)) return prefix;
    if (fs::exists(fs::path(p) / "checkpoint") || is_orbax_checkpoint(p)) {
      // A checkpoint named outright gets the check a resume's scan gives each
      // step (the manifest's files and sizes, every chunk present): zarr reads
      // a missing chunk as fill values, so a damaged step would restore
      // silently.
      if (auto bad = validate_checkpoint(p))
        throw CheckpointError("[checkpoint] " + *bad + "\n  hint: the checkpoint is " +
                              (is_orbax_checkpoint(p) ? "an Orbax one that cannot be read" : "damaged") +
                              "; `t5x ckpt info " + p +
                              "` lists what is wrong; restore another checkpoint_<step>");
      return p;
    }
    auto scan = latest_valid_step(p);
    for (const auto& [dir, why] : scan.skipped)
      std::fprintf(stderr, "warning: checkpoint %s skipped while looking for the latest one: %s\n", dir.c_str(),
                   why.c_str());
    if (scan.step) return checkpoint_dir_for_step(p, *scan.step);
    if (cfg.mode == "specific")
      throw CheckpointError("[checkpoint] no checkpoint at '" + p +
                            "'\n  hint: pass a checkpoint_<step> directory (it holds a file named 'checkpoint')");
  }
  return std::nullopt;
}

bool all_finite(const ParamTree& params, std::string* first_bad) {
  for (const auto& [name, a] : params) {
    if (!is_floating(a.dtype())) continue;
    const Array h = a.to_host();  // this process's values (its shard of a split param)
    if (!kernels::cpu::all_finite(h.dtype(), h.raw_data(), h.local_size())) {
      if (first_bad) *first_bad = name;
      return false;
    }
  }
  return true;
}

}  // namespace t5x::trainer
