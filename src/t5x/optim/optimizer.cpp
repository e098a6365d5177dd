#include "t5x/optim/optimizer.h"

#include <algorithm>

#include "ops/elementwise.h"

namespace t5x {

namespace {
const std::string kTarget = "target/";
const std::string kSlots = "state/param_states/";
const std::string kStep = "state/step";
}  // namespace

std::vector<std::string> split_axes(const Array& a) {
  std::vector<std::string> out;
  const Sharding& sh = a.sharding();
  if (sh.is_single_device()) return out;
  for (const auto& axes : sh.spec.dims)
    for (const auto& ax : axes)
      if (sh.mesh->axis_sizes[size_t(sh.mesh->axis_index(ax))] > 1 &&
          std::find(out.begin(), out.end(), ax) == out.end())
        out.push_back(ax);
  return out;
}

std::vector<int64_t> shard_offsets(const Array& a, int64_t device_id) {
  std::vector<int64_t> off(size_t(a.rank()), 0);
  const Sharding& sh = a.sharding();
  if (sh.is_single_device()) return off;
  const int64_t dev = device_id < 0 ? sh.mesh->device_id : device_id;
  const Shape local = a.local_shape();
  for (int d = 0; d < a.rank() && d < int(sh.spec.dims.size()); ++d) {
    int64_t idx = 0;  // row-major over the dim's axes, major to minor
    for (const auto& ax : sh.spec.dims[size_t(d)]) {
      const int i = sh.mesh->axis_index(ax);
      idx = idx * sh.mesh->axis_sizes[size_t(i)] + sh.mesh->coord(dev, i);
    }
    off[size_t(d)] = idx * local[d].size;
  }
  return off;
}

std::map<std::string, std::optional<std::vector<int>>> Optimizer::slot_dims(const std::string& path,
                                                                            const Shape& shape) const {
  const OptimizerState st = init(ParamTree{{path, Array::zeros(shape, DType::f32)}});
  std::map<std::string, std::optional<std::vector<int>>> out;
  for (const auto& [k, v] : st.slots) {
    if (k.rfind(path + "/", 0) != 0) continue;
    const std::string slot = k.substr(path.size() + 1);
    if (v.shape().sizes() == shape.sizes()) {
      std::vector<int> all(size_t(shape.rank()));
      for (int d = 0; d < shape.rank(); ++d) all[size_t(d)] = d;
      out[slot] = all;
    } else if (v.size() == 1) {
      out[slot] = std::nullopt;
    } else {
      throw std::invalid_argument("[" + name() + "] slot '" + slot + "' " + v.shape().to_string() + " of a param " +
                                  shape.to_string() + " keeps some of its dims: the optimizer must say which");
    }
  }
  return out;
}

std::map<std::string, Array> state_dict(const ParamTree& params, const OptimizerState& state) {
  std::map<std::string, Array> out;
  for (const auto& [k, v] : params) out[kTarget + k] = v;
  out[kStep] = Array::from_ints(Shape{}, {state.step}, DType::i32);
  for (const auto& [k, v] : state.slots) out[kSlots + k] = v;
  return out;
}

std::map<std::string, std::vector<std::string>> state_dict_logical_axes(const ParamTree& params,
                                                                       const OptimizerState& state) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [k, v] : params) out[kTarget + k] = v.names();
  out[kStep] = {};
  for (const auto& [k, v] : state.slots) {
    auto it = state.slot_axes.find(k);
    out[kSlots + k] = it != state.slot_axes.end() ? it->second : std::vector<std::string>(size_t(v.rank()), "");
  }
  return out;
}

namespace {
Status load_one(const std::map<std::string, Array>& dict, const std::string& key, Array& dst) {
  auto it = dict.find(key);
  if (it == dict.end())
    return NotFoundError("optimizer state dict has no '" + key +
                         "'; was the checkpoint written with another optimizer or model? "
                         "(restore with strict=false to re-initialize missing entries)");
  const Array& src = it->second;
  if (src.local_shape().sizes() != dst.local_shape().sizes())
    return InvalidArgumentError("optimizer state dict entry '" + key + "' has shape " + src.shape().to_string() +
                                " but the model expects " + dst.shape().to_string());
  Array v = src.dtype() == dst.dtype() ? src : cast(src, dst.dtype());
  std::memcpy(dst.raw_data(), v.raw_data(), dst.nbytes());
  return Status();
}
}  // namespace

Status load_state_dict(const std::map<std::string, Array>& dict, ParamTree& params, OptimizerState& state) {
  size_t used = 0;
  for (auto& [k, v] : params) {
    T5X_RETURN_IF_ERROR(load_one(dict, kTarget + k, v));
    ++used;
  }
  auto st = dict.find(kStep);
  if (st == dict.end()) return NotFoundError("optimizer state dict has no 'state/step'");
  state.step = int64_t(st->second.item());
  ++used;
  for (auto& [k, v] : state.slots) {
    T5X_RETURN_IF_ERROR(load_one(dict, kSlots + k, v));
    ++used;
  }
  if (used != dict.size()) {
    for (const auto& [k, v] : dict) {
      bool known = k == kStep || (k.rfind(kTarget, 0) == 0 && params.count(k.substr(kTarget.size()))) ||
                   (k.rfind(kSlots, 0) == 0 && state.slots.count(k.substr(kSlots.size())));
      if (!known)
        return InvalidArgumentError("optimizer state dict has an unexpected entry '" + k +
                                    "' (not a parameter or slot of this optimizer)");
    }
  }
  return Status();
}

}  // namespace t5x
