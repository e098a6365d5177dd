#include "t5x/checkpoints/param_layout.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

namespace t5x {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  HostTensor t;
  t.shape = s;
  return t.shape_string();
}

int64_t product(const std::vector<int64_t>& shape, const std::vector<int>& dims, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) n *= shape[size_t(dims[i])];
  return n;
}

// The checkpoint box of a model box [start, stop) (whole when nullopt): a
// model dim's range over grouped dims must cover whole blocks of the inner
// ones (heads whole, all of kv). `layers`: the layer axis's range.
IndexBox checkpoint_box(const LeafPlace& p, const std::vector<int64_t>& model_shape, const std::optional<IndexBox>& box,
                        std::pair<int64_t, int64_t> layers, const std::string& model_path) {
  IndexBox b = IndexBox::full(p.shape);
  for (size_t d = 0; d < p.groups.size(); ++d) {
    const std::vector<int>& g = p.groups[d];
    const int64_t s = box ? box->start[d] : 0, e = box ? box->stop[d] : model_shape[d];
    const int64_t inner = product(p.shape, g, 1);
    if (s % inner != 0 || e % inner != 0)
      throw CheckpointError("[checkpoint] the slice " + std::to_string(s) + ":" + std::to_string(e) + " of dim " +
                            std::to_string(d) + " of `" + model_path + "` splits a block of " + std::to_string(inner) +
                            " in `" + p.path + "` " + shape_str(p.shape) +
                            "\n  hint: split the heads dim only at whole heads (a mesh 'model' axis that divides num_heads)");
    b.start[size_t(g[0])] = s / inner;
    b.stop[size_t(g[0])] = e / inner;
  }
  if (p.layer_axis >= 0) {
    b.start[size_t(p.layer_axis)] = layers.first;
    b.stop[size_t(p.layer_axis)] = layers.second;
  }
  return b;
}

// "<stack>/layers_<i>/<rest>" split into its parts (a layer parameter of
// the encoder or decoder), without std::regex: Adafactor asks for every
// parameter at every step (factor_by_rule).
struct LayerName {
  std::string stack, index, rest;
};
std::optional<LayerName> layer_name(const std::string& name) {
  for (const char* stack : {"encoder", "decoder"}) {
    const std::string head = std::string(stack) + "/layers_";
    if (name.rfind(head, 0) != 0) continue;
    const size_t slash = name.find('/', head.size());
    if (slash == std::string::npos || slash == head.size() || slash + 1 == name.size()) return std::nullopt;
    const std::string index = name.substr(head.size(), slash - head.size());
    if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return LayerName{stack, index, name.substr(slash + 1)};
  }
  return std::nullopt;
}
// "<attention module>/<proj>/kernel" with proj one of `projs`.
bool attention_kernel(const std::string& rest, std::initializer_list<const char*> projs) {
  for (const char* module : {"attention", "self_attention", "encoder_decoder_attention"})
    for (const char* proj : projs)
      if (rest == std::string(module) + "/" + proj + "/kernel") return true;
  return false;
}
bool qkv_kernel(const std::string& rest) { return attention_kernel(rest, {"query", "key", "value"}); }
bool out_kernel(const std::string& rest) { return attention_kernel(rest, {"out"}); }

std::string dims_str(const std::vector<int>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

}  // namespace

bool scalable_t5_relaid(const std::string& name, size_t rank, bool scan_layers) {
  const auto l = layer_name(name);
  if (!l) return false;
  if (scan_layers) return true;
  return rank == 2 && (qkv_kernel(l->rest) || out_kernel(l->rest));
}

ParamLayout ParamLayout::scalable_t5(const std::vector<LayoutParam>& params, const ScalableT5Layout& opt,
                                     const SlotDimsFn& slot_dims) {
  if (opt.param_scan_axis < 0 || opt.param_scan_axis > 1)
    throw CheckpointError("[checkpoint] param_scan_axis = " + std::to_string(opt.param_scan_axis) +
                          " is not a dim every layer parameter has\n  hint: use 0 or 1 (scalable_t5's default is 1)");
  if (opt.head_dim <= 0) throw CheckpointError("[checkpoint] scalable_t5 layout needs head_dim > 0");
  // Layers per stack, and which of a stack's parameters each layer has.
  std::map<std::string, int64_t> layers;
  std::map<std::string, std::set<int64_t>> present;  // "<stack>/<rest>" -> layers holding it
  for (const auto& p : params) {
    const auto l = layer_name(p.name);
    if (!l) continue;
    const int64_t i = std::stoll(l->index);
    layers[l->stack] = std::max(layers[l->stack], i + 1);
    present[l->stack + "/" + l->rest].insert(i);
  }
  ParamLayout out;
  out.scalable_ = opt;
  std::map<std::string, SlotDims> checkpoint_slots;  // checkpoint param path -> its slots' dims
  for (const auto& p : params) {
    const auto l = layer_name(p.name);
    if (!l) continue;
    const std::string& stack = l->stack;
    const std::string& rest = l->rest;
    const int64_t i = std::stoll(l->index), n_layers = layers.at(stack);
    const size_t rank = p.shape.size();
    if (opt.scan_layers && int64_t(present.at(stack + "/" + rest).size()) != n_layers)
      throw CheckpointError("[checkpoint] scan_layers stacks `" + stack + "/layers_i/" + rest + "` over the " +
                            std::to_string(n_layers) + " layers of the " + stack + ", but only " +
                            std::to_string(present.at(stack + "/" + rest).size()) +
                            " of them have it\n  hint: scan_layers needs identical layers; bind scan_layers = False");
    // The checkpoint's per-layer dims, their names, and the model dims' groups.
    std::vector<int64_t> dims = p.shape;
    std::vector<std::string> names = p.axes;
    names.resize(rank);
    std::vector<std::vector<int>> groups;
    for (size_t d = 0; d < rank; ++d) groups.push_back({int(d)});
    const bool qkv = rank == 2 && qkv_kernel(rest);
    const bool out_k = rank == 2 && out_kernel(rest);
    if (qkv || out_k) {
      const size_t j = qkv ? 1 : 0;  // the joined_kv dim
      if (p.shape[j] % opt.head_dim != 0)
        throw CheckpointError("[checkpoint] `" + p.name + "` " + shape_str(p.shape) + ": its joined heads dim " +
                              std::to_string(p.shape[j]) + " is not a multiple of head_dim " +
                              std::to_string(opt.head_dim));
      const int64_t heads = p.shape[j] / opt.head_dim;
      if (qkv) {
        dims = {p.shape[0], heads, opt.head_dim};
        names = {names[0], "heads", "kv"};
        groups = {{0}, {1, 2}};
      } else {
        dims = {heads, opt.head_dim, p.shape[1]};
        names = {"heads", "kv", names[1]};
        groups = {{0, 1}, {2}};
      }
    }
    if (!scalable_t5_relaid(p.name, rank, opt.scan_layers)) continue;  // stored as the model holds it
    LeafPlace place;
    place.groups = groups;
    place.layer = opt.scan_layers ? i : 0;
    std::string param_path = p.name;
    if (opt.scan_layers) {
      const int a = opt.param_scan_axis;
      dims.insert(dims.begin() + a, n_layers);
      names.insert(names.begin() + a, "layers");
      for (auto& g : place.groups)
        for (int& d : g)
          if (d >= a) ++d;
      place.layer_axis = a;
      param_path = stack + "/" + stack + "/" + rest;
    }
    place.path = "target/" + param_path;
    place.shape = dims;
    place.axes = names;
    const std::string model_param = "target/" + p.name;
    out.places_[model_param] = place;
    auto& members = out.members_[place.path];
    members.resize(size_t(opt.scan_layers ? n_layers : 1));
    members[size_t(place.layer)] = model_param;
    if (!slot_dims) continue;
    // Optimizer slots: the checkpoint's slot of the stacked / split parameter
    // that keeps the same dims as the model's slot.
    auto cs = checkpoint_slots.find(param_path);
    if (cs == checkpoint_slots.end()) {
      SlotDims held;
      try {
        held = slot_dims(param_path, dims, names);
      } catch (const std::exception& e) {
        throw CheckpointError("[checkpoint] scalable_t5's layout holds `" + p.name + "` as `" + param_path + "` " +
                              shape_str(dims) + ", for which the optimizer has no state: " + e.what() +
                              "\n  hint: t5x factors these parameters by their logical axes: bind "
                              "adafactor.Adafactor.logical_factor_rules = @adafactor.standard_logical_factor_rules() "
                              "(as scalable_t5's base.gin does)");
      }
      cs = checkpoint_slots.emplace(param_path, std::move(held)).first;
    }
    for (const auto& [slot, kept] : slot_dims(p.name, p.shape, p.axes)) {
      LeafPlace sp;
      sp.layer = place.layer;
      const std::string model_slot = "state/param_states/" + p.name + "/" + slot;
      std::string found;
      if (!kept) {
        auto it = cs->second.find(slot);
        if (it != cs->second.end() && !it->second) {
          found = slot;
          sp.whole = true;
          sp.shape = {1};
          sp.groups = {{0}};
        }
      } else {
        std::vector<int> want;
        for (int k : *kept) want.insert(want.end(), place.groups[size_t(k)].begin(), place.groups[size_t(k)].end());
        if (place.layer_axis >= 0) want.push_back(place.layer_axis);
        std::sort(want.begin(), want.end());
        // The slot of the same name when it keeps those dims (v and m keep
        // them all), else the one that does (Adafactor's v_row and v_col
        // trade places when the model's matrix and t5x's rule disagree on
        // which dim is the row).
        auto same = cs->second.find(slot);
        if (same != cs->second.end() && same->second && *same->second == want) found = slot;
        for (const auto& [cslot, ckept] : cs->second)
          if (found.empty() && ckept && *ckept == want) found = cslot;
        if (!found.empty()) {
          auto pos = [&](int d) { return int(std::find(want.begin(), want.end(), d) - want.begin()); };
          for (int d : want) sp.shape.push_back(dims[size_t(d)]);
          for (int k : *kept) {
            std::vector<int> g;
            for (int d : place.groups[size_t(k)]) g.push_back(pos(d));
            sp.groups.push_back(g);
          }
          sp.layer_axis = place.layer_axis >= 0 ? pos(place.layer_axis) : -1;
        }
      }
      if (found.empty())
        throw CheckpointError("[checkpoint] the optimizer's slot '" + slot + "' of `" + p.name + "` (dims " +
                              (kept ? dims_str(*kept) : std::string("none")) + " of " + shape_str(p.shape) +
                              ") has no counterpart among its slots of `" + param_path + "` " + shape_str(dims) +
                              " in scalable_t5's layout\n  hint: t5x factors these parameters by their logical "
                              "axes: bind adafactor.Adafactor.logical_factor_rules = "
                              "@adafactor.standard_logical_factor_rules() (as scalable_t5's base.gin does)");
      sp.path = "state/param_states/" + param_path + "/" + found;
      out.places_[model_slot] = sp;
      auto& sm = out.members_[sp.path];
      sm.resize(size_t(opt.scan_layers ? n_layers : 1));
      sm[size_t(sp.layer)] = model_slot;
    }
  }
  return out;
}

const LeafPlace* ParamLayout::find(const std::string& model_path) const {
  auto it = places_.find(model_path);
  return it == places_.end() ? nullptr : &it->second;
}

namespace {
// The parameter a model leaf belongs to: "target/<param>".
std::string owning_param(const std::string& model_path) {
  if (model_path.rfind("target/", 0) == 0) return model_path;
  const std::string rest = model_path.substr(std::string("state/param_states/").size());
  return "target/" + rest.substr(0, rest.rfind('/'));
}
}  // namespace

bool ParamLayout::has(const CheckpointReader& r, const std::string& model_path) const {
  const LeafPlace* p = find(model_path);
  return r.has(model_path) || (p && r.has(p->path));
}

HostTensor ParamLayout::read(const CheckpointReader& r, const std::string& model_path,
                             const std::vector<int64_t>& expected, const std::optional<IndexBox>& box,
                             std::string_view cast_to) const {
  const LeafPlace* p = find(model_path);
  // A checkpoint that holds the parameter as the model does (t5x.cpp's
  // per-layer scalable_t5 before this layout) is read leaf by leaf as it is.
  if (p) {
    const std::string param = owning_param(model_path);
    const LeafPlace* pp = find(param);
    if (pp && r.has(param) && !(pp->path == param && r.info(param).shape == pp->shape)) {
      const std::vector<int64_t> have = r.info(param).shape;
      const std::string h = have == *model_shape(param) ? "" : hint(r, model_path);
      if (!h.empty())
        throw CheckpointError("[checkpoint] `" + param + "` " + shape_str(have) + " in checkpoint '" + r.dir() +
                              "' is not in the layout this model reads\n  hint: " + h);
      p = nullptr;
    }
  }
  if (!p) return r.read_expect(model_path, expected, box, cast_to);
  if (!r.has(p->path))
    throw CheckpointError("[checkpoint] " + r.dir() + " has no `" + p->path + "`, where scalable_t5's layout keeps `" +
                          model_path + "`");
  const std::vector<int64_t> have = r.info(p->path).shape;
  if (have != p->shape) {
    const std::string h = hint(r, model_path);
    throw CheckpointError("Shape of `" + p->path + "` in checkpoint " + shape_str(have) + " does not match expected " +
                          shape_str(p->shape) + " (scalable_t5's layout of `" + model_path + "` " +
                          shape_str(expected) + "; checkpoint '" + r.dir() + "')" + (h.empty() ? "" : "\n  hint: " + h));
  }
  std::vector<int64_t> local = expected;
  if (box) local = box->extent();
  if (p->whole) {
    HostTensor h = r.read(p->path, std::nullopt, cast_to);
    int64_t n = 1;
    for (int64_t e : local) n *= e;
    if (h.numel() != n)
      throw CheckpointError("Shape of `" + p->path + "` in checkpoint " + shape_str(have) + " does not match expected " +
                            shape_str(expected) + " (checkpoint '" + r.dir() + "')");
    h.shape = local;
    return h;
  }
  for (size_t d = 0; d < p->groups.size(); ++d)
    if (d >= expected.size() || product(p->shape, p->groups[d]) != expected[d])
      throw CheckpointError("Shape of `" + p->path + "` in checkpoint " + shape_str(have) +
                            " does not hold the model's " + shape_str(expected) + " for `" + model_path +
                            "` (checkpoint '" + r.dir() + "')");
  HostTensor h = r.read(p->path, checkpoint_box(*p, expected, box, {p->layer, p->layer + 1}, model_path), cast_to);
  h.shape = local;  // the box's dims, in order, flatten into the model's
  return h;
}

std::optional<std::vector<int64_t>> ParamLayout::model_shape(const std::string& model_path) const {
  const LeafPlace* p = find(model_path);
  if (!p) return std::nullopt;
  if (p->whole) return std::vector<int64_t>{1};
  std::vector<int64_t> s;
  for (const auto& g : p->groups) s.push_back(product(p->shape, g));
  return s;
}

std::string ParamLayout::hint(const CheckpointReader& r, const std::string& model_path) const {
  const std::string param = owning_param(model_path).substr(7);
  const auto l = layer_name(param);
  if (!l) return "";
  const std::string& stack = l->stack;
  const std::string& rest = l->rest;
  const std::string stacked = "target/" + stack + "/" + stack + "/" + rest;
  const bool scanned = scalable_ && scalable_->scan_layers;
  const std::string network = "t5x's scalable_t5 network (from t5x.examples.scalable_t5 import network)";
  if (r.has(stacked)) {
    const std::vector<int64_t> have = r.info(stacked).shape;
    const std::string where = "the checkpoint stacks each layer parameter over the layers (`" + stacked + "` " +
                              shape_str(have) + ", scalable_t5's scan_layers = True)";
    if (!scalable_) return where + ": configure the model with " + network + ", whose scan_layers is True";
    if (!scanned) return where + ": bind network.T5Config.scan_layers = True";
    const LeafPlace* p = find("target/" + param);
    if (p && p->layer_axis >= 0 && have != p->shape) {
      std::vector<int64_t> other = p->shape;
      const int64_t n = other[size_t(p->layer_axis)];
      other.erase(other.begin() + p->layer_axis);
      const int a = 1 - p->layer_axis;
      if (size_t(a) <= other.size()) {
        other.insert(other.begin() + a, n);
        if (other == have)
          return "the checkpoint stacks the layers at dim " + std::to_string(a) +
                 ": bind network.T5Config.param_scan_axis = " + std::to_string(a);
      }
    }
    return "";
  }
  const std::string per_layer = "target/" + param;
  // A per-layer query kernel [embed, heads, kv]: scalable_t5 (grouped-query
  // attention splits only key and value).
  const std::string module = rest.substr(0, rest.find('/'));
  const std::string query = "target/" + stack + "/layers_" + l->index + "/" + module + "/query/kernel";
  const bool split_heads = r.has(query) && r.info(query).shape.size() == 3;
  if (scanned && r.has(per_layer))
    return "the checkpoint holds one parameter per layer (`" + per_layer + "` " + shape_str(r.info(per_layer).shape) +
           ", scalable_t5's scan_layers = False): bind network.T5Config.scan_layers = False";
  if (!scalable_ && split_heads)
    return "the checkpoint's attention kernels split the heads (`" + query + "` " + shape_str(r.info(query).shape) +
           ", t5x's scalable_t5 layout): configure the model with " + network + " and scan_layers = False";
  return "";
}

std::vector<LayoutParam> ParamLayout::checkpoint_params(const std::vector<LayoutParam>& params) const {
  std::vector<LayoutParam> out;
  std::set<std::string> seen;
  for (const auto& p : params) {
    const LeafPlace* place = find("target/" + p.name);
    if (!place) {
      out.push_back(p);
    } else if (seen.insert(place->path).second) {
      out.push_back({place->path.substr(7), place->shape, place->axes});
    }
  }
  return out;
}

std::vector<std::string> ParamLayout::model_paths(const std::vector<std::string>& checkpoint_paths) const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  auto add = [&](const std::string& p) {
    if (!p.empty() && seen.insert(p).second) out.push_back(p);
  };
  for (const auto& cp : checkpoint_paths) {
    auto it = members_.find(cp);
    if (it != members_.end())
      for (const auto& m : it->second) add(m);
    if (it == members_.end() || places_.count(cp)) add(cp);
  }
  return out;
}

std::vector<SaveLeaf> ParamLayout::to_checkpoint(std::vector<SaveLeaf> leaves) const {
  if (identity()) return leaves;
  std::vector<SaveLeaf> out;
  std::map<std::string, std::vector<SaveLeaf*>> stacks;  // checkpoint path -> leaves by layer
  for (auto& l : leaves) {
    const LeafPlace* p = find(l.path);
    if (!p) continue;
    auto& v = stacks[p->path];
    v.resize(members_.at(p->path).size());
    v[size_t(p->layer)] = &l;
  }
  for (auto& l : leaves)
    if (!find(l.path)) out.push_back(std::move(l));
  for (auto& [path, v] : stacks) {
    const std::vector<std::string>& names = members_.at(path);
    for (size_t i = 0; i < v.size(); ++i)
      if (!v[i])
        throw CheckpointError("[checkpoint] `" + path + "` stacks " + std::to_string(v.size()) + " layers, but `" +
                              names[i] + "` is not in the state being saved");
    const SaveLeaf& first = *v[0];
    const LeafPlace& p = *find(first.path);
    if (p.whole) {
      SaveLeaf l = first;
      l.path = path;
      out.push_back(std::move(l));
      continue;
    }
    for (const SaveLeaf* l : v)
      if (l->partitioned != first.partitioned || l->data.dtype != first.data.dtype ||
          l->data.shape != first.data.shape || (first.partitioned && (l->box.start != first.box.start ||
                                                                      l->box.stop != first.box.stop)))
        throw CheckpointError("[checkpoint] the layers stacked into `" + path + "` differ in dtype, shape or split ('" +
                              first.path + "' and '" + l->path + "')");
    const std::vector<int64_t> model_shape = first.partitioned ? first.global_shape : first.data.shape;
    const std::optional<IndexBox> model_box = first.partitioned ? std::optional<IndexBox>(first.box) : std::nullopt;
    const int64_t n = int64_t(v.size());
    const IndexBox box = checkpoint_box(p, model_shape, model_box, {0, p.layer_axis >= 0 ? n : 1}, first.path);
    HostTensor t;
    t.dtype = first.data.dtype;
    t.shape = box.extent();
    if (p.layer_axis < 0) {
      t.data = first.data.data;
    } else {
      // [outer, layers, inner]: layer i's shard is its [outer, inner].
      int64_t outer = 1;
      for (int d = 0; d < p.layer_axis; ++d) outer *= t.shape[size_t(d)];
      const size_t layer_bytes = first.data.data.size();
      const size_t inner = outer > 0 ? layer_bytes / size_t(outer) : 0;
      t.data.resize(layer_bytes * size_t(n));
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < n; ++i)
          std::memcpy(t.data.data() + (size_t(o) * size_t(n) + size_t(i)) * inner,
                      v[size_t(i)]->data.data.data() + size_t(o) * inner, inner);
    }
    SaveLeaf l = first.partitioned ? SaveLeaf::sharded(path, std::move(t), p.shape, box, first.write)
                                   : SaveLeaf::inline_array(path, std::move(t));
    l.compressor = first.compressor;
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace t5x
