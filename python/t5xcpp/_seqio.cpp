// t5xcpp._seqio: the C++ seqio pipeline for Python (docs/python.md).
// t5xcpp/seqio.py re-exports it with seqio's names. Batches come from the
// same seqio::BatchedDataset the trainer uses (src/t5x/trainer/data.h), so
// they are those of the C++ pipeline; the GIL is released while it runs.
#include <dlfcn.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>
#include <limits>
#include <mutex>
#include <random>

#include "seqio/batching.h"
#include "seqio/errors.h"
#include "seqio/feature_converters/feature_converters.h"
#include "seqio/metrics/metrics.h"
#include "seqio/mixture.h"
#include "seqio/registration.h"
#include "seqio/task.h"
#ifdef T5X_HAVE_TASK_FILES
#include "t5x/task_file/task_file.h"
#endif
#ifdef T5X_HAVE_BIBLE_TASKS
#include "bible/tasks.h"
#endif

namespace py = pybind11;
using nlohmann::json;

namespace {

// ---- values -----------------------------------------------------------------

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

py::array_t<int32_t> tokens_to_numpy(const seqio::Tokens& t) {
  return py::array_t<int32_t>(std::vector<py::ssize_t>{static_cast<py::ssize_t>(t.size())}, t.data());
}

// Tokens -> int32 array, text -> bytes (as seqio's as_numpy_iterator), int64 -> int, float64 -> float.
py::dict example_to_dict(const seqio::Example& ex) {
  py::dict d;
  for (const auto& [k, v] : ex) {
    py::object o;
    if (const auto* t = std::get_if<seqio::Tokens>(&v))
      o = tokens_to_numpy(*t);
    else if (const auto* s = std::get_if<std::string>(&v))
      o = py::bytes(*s);
    else if (const auto* i = std::get_if<int64_t>(&v))
      o = py::int_(*i);
    else
      o = py::float_(std::get<double>(v));
    d[py::str(k)] = o;
  }
  return d;
}

// The inverse, for converter inputs: int sequences -> Tokens, str/bytes -> text.
seqio::Example dict_to_example(const py::dict& d, size_t index) {
  seqio::Example ex;
  for (const auto& [k, v] : d) {
    const std::string key = py::str(k);
    if (py::isinstance<py::bytes>(v) || py::isinstance<py::str>(v))
      ex[key] = py::isinstance<py::bytes>(v) ? std::string(v.cast<py::bytes>()) : v.cast<std::string>();
    else if (py::isinstance<py::bool_>(v) || py::isinstance<py::int_>(v))
      ex[key] = v.cast<int64_t>();
    else if (py::isinstance<py::float_>(v))
      ex[key] = v.cast<double>();
    else {
      try {
        // Integer ids only: a float array would be truncated, ids past int32 wrapped.
        auto any = py::array::ensure(v);
        if (!any || any.ndim() != 1) throw py::cast_error();
        if (any.size() == 0) {  // [] is float64 to numpy
          ex[key] = seqio::Tokens();
          continue;
        }
        const char kind = any.dtype().kind();
        if (kind != 'i' && kind != 'u' && kind != 'b')
          throw py::value_error("example " + std::to_string(index) + ", feature '" + key +
                                "': token ids must be integers, got dtype " + std::string(py::str(any.dtype())));
        auto a = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(any);
        seqio::Tokens t(size_t(a.size()));
        for (py::ssize_t i = 0; i < a.size(); ++i) {
          const int64_t id = a.data()[i];
          if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max())
            throw py::value_error("example " + std::to_string(index) + ", feature '" + key + "': token id " +
                                  std::to_string(id) + " at position " + std::to_string(i) + " is outside int32");
          t[size_t(i)] = int32_t(id);
        }
        ex[key] = std::move(t);
      } catch (const py::error_already_set&) {
        throw py::value_error("example " + std::to_string(index) + ", feature '" + key +
                              "': expected a 1-D sequence of token ids, str/bytes, int or float");
      } catch (const py::cast_error&) {
        throw py::value_error("example " + std::to_string(index) + ", feature '" + key +
                              "': expected a 1-D sequence of token ids, str/bytes, int or float");
      }
    }
  }
  return ex;
}

// Equal-length token rows -> {feature: int32 [rows, length]} ([length] when squeeze).
py::dict rows_to_batch(const std::vector<seqio::Example>& rows, bool squeeze) {
  py::dict out;
  if (rows.empty()) return out;
  const auto n = static_cast<py::ssize_t>(rows.size());
  for (const auto& [key, v] : rows[0]) {
    const auto* first = std::get_if<seqio::Tokens>(&v);
    if (!first) continue;
    const auto len = static_cast<py::ssize_t>(first->size());
    py::array_t<int32_t> a(squeeze ? std::vector<py::ssize_t>{len} : std::vector<py::ssize_t>{n, len});
    int32_t* p = a.mutable_data();
    for (py::ssize_t r = 0; r < n; ++r) {
      const auto& t = seqio::get_tokens(rows[r], key);
      if (static_cast<py::ssize_t>(t.size()) != len)
        throw py::value_error("feature '" + key + "' has length " + std::to_string(t.size()) + " in row " +
                              std::to_string(r) + " but " + std::to_string(len) + " in row 0");
      std::copy(t.begin(), t.end(), p + r * len);
    }
    out[py::str(key)] = a;
  }
  return out;
}

seqio::ShardInfo to_shard(const py::object& o) {
  if (o.is_none()) return {};
  if (py::isinstance<seqio::ShardInfo>(o)) return o.cast<seqio::ShardInfo>();
  if (py::isinstance<py::str>(o)) return seqio::parse_shard_info(o.cast<std::string>());
  auto t = o.cast<std::vector<int>>();
  if (t.size() != 2) throw py::value_error("shard_info: expected (index, num_shards), ShardInfo or 'i/n'");
  seqio::ShardInfo s{t[0], t[1]};
  if (s.num_shards < 1 || s.index < 0 || s.index >= s.num_shards)
    throw py::value_error("shard_info: index " + std::to_string(s.index) + " is not in [0, " +
                          std::to_string(s.num_shards) + ")");
  return s;
}

// ---- resumable iterators ----------------------------------------------------------------

// What a saved state must agree on to be restored (as `seqio show --resume` checks).
json identity_of(const std::string& name, const seqio::DatasetOptions& o) {
  return {{"name", name},
          {"split", o.split},
          {"shuffle", o.shuffle},
          {"seed", *o.seed},
          {"shard", std::to_string(o.shard.index) + "/" + std::to_string(o.shard.num_shards)},
          {"num_epochs", o.num_epochs ? json(*o.num_epochs) : json(nullptr)},
          {"block_size", o.block_size},
          {"sequence_length", o.sequence_lengths},
          {"use_cached", o.use_cached}};
}

json parse_state(const std::string& state) {
  auto j = json::parse(state, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("position") || !j.contains("dataset"))
    throw py::value_error("state: not a state of t5xcpp.seqio (hint: pass what get_state() returned)");
  return j;
}

void check_identity(const json& saved, const json& want) {
  for (const auto& [key, v] : want.items()) {
    if (!saved.contains(key)) throw py::value_error("state: field 'dataset." + key + "' is missing");
    if (saved[key] != v)
      throw py::value_error("state: saved with " + key + " " + saved[key].dump() + ", but this dataset has " + key +
                            " " + v.dump() + " (hint: restore with the arguments that made the state)");
  }
}

// seed=None: the seed saved in `state`, else a random one (kept, so that get_state() can be restored).
void resolve_seed(seqio::DatasetOptions& o, const std::optional<uint64_t>& seed, const std::optional<std::string>& state) {
  if (seed) {
    o.seed = seed;
  } else if (state) {
    o.seed = parse_state(*state)["dataset"].value("seed", uint64_t{0});
  } else {
    std::random_device rd;
    o.seed = (uint64_t{rd()} << 32) | rd();
  }
}

// Task.get_dataset / Mixture.get_dataset: preprocessed examples, one at a time.
class ExampleIterator {
 public:
  ExampleIterator(std::string name, seqio::DatasetOptions o, const std::optional<std::string>& state)
      : name_(std::move(name)), o_(std::move(o)) {
    if (state) set_state(*state);
    else ds_ = seqio::get_dataset(name_, o_);
  }
  py::dict next() {
    seqio::Example ex;
    bool ok;
    {
      py::gil_scoped_release nogil;  // before the lock: a thread waiting for it holds no GIL
      std::lock_guard<std::mutex> lock(*mu_);
      ok = ds_->next(ex);
    }
    if (!ok) throw py::stop_iteration();
    return example_to_dict(ex);
  }
  std::string get_state() const {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(*mu_);
    return json{{"dataset", identity_of(name_, o_)}, {"position", json::parse(seqio::position_to_json(ds_->position()))}}
        .dump();
  }
  void set_state(const std::string& state) {
    auto j = parse_state(state);
    check_identity(j["dataset"], identity_of(name_, o_));
    auto o = o_;
    o.start = 0;
    o.resume = seqio::position_from_json(j["position"].dump(), "state");
    auto ds = seqio::get_dataset(name_, o);
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(*mu_);
    ds_ = std::move(ds);
  }
  py::dict stats() const {
    seqio::PipelineStats s;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(*mu_);
      s = ds_->stats();
    }
    py::dict d;
    d["records_read"] = s.records_read;
    d["examples_emitted"] = s.examples_emitted;
    d["examples_dropped"] = s.examples_dropped;
    d["trimmed_examples"] = s.trimmed_examples;
    d["trimmed_tokens"] = s.trimmed_tokens;
    return d;
  }
  uint64_t seed() const { return *o_.seed; }

 private:
  std::string name_;
  seqio::DatasetOptions o_;
  std::unique_ptr<seqio::Dataset> ds_;
  // One pipeline is not reentrant, and next() runs without the GIL: calls
  // from several Python threads take turns (as a tf.data iterator's do).
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
};

using ConverterPtr = std::shared_ptr<const seqio::FeatureConverter>;

// seqio.get_dataset: converted model features in batches of batch_size rows
// (drop_remainder), resumable at any batch.
class BatchIterator {
 public:
  BatchIterator(std::string name, seqio::DatasetOptions o, ConverterPtr conv, std::optional<int> batch_size,
                bool drop_remainder, const std::optional<std::string>& state)
      : name_(std::move(name)), o_(std::move(o)), conv_(std::move(conv)), batch_size_(batch_size),
        drop_remainder_(drop_remainder) {
    if (!conv_) throw py::value_error("get_dataset: feature_converter is required (e.g. EncDecFeatureConverter())");
    if (batch_size_ && *batch_size_ < 1)
      throw py::value_error("get_dataset: batch_size must be positive, got " + std::to_string(*batch_size_));
    build(state ? std::optional<seqio::BatchPosition>(position_of(*state)) : std::nullopt);
  }
  py::dict next() {
    std::vector<seqio::Example> rows;
    bool ok;
    {
      py::gil_scoped_release nogil;  // before the lock: a thread waiting for it holds no GIL
      std::lock_guard<std::mutex> lock(*mu_);
      ok = ds_->next(rows);
    }
    if (!ok) throw py::stop_iteration();
    return rows_to_batch(rows, !batch_size_);
  }
  std::string get_state() const {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(*mu_);
    return json{{"dataset", identity()}, {"position", json::parse(seqio::batch_position_to_json(ds_->position()))}}
        .dump();
  }
  void set_state(const std::string& state) {
    const seqio::BatchPosition at = position_of(state);
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(*mu_);
    build(at);
  }
  uint64_t seed() const { return *o_.seed; }
  int64_t batches() const {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(*mu_);
    return ds_->position().batches;
  }

 private:
  json identity() const {
    json j = identity_of(name_, o_);
    j["feature_converter"] = conv_->name();
    j["pack"] = conv_->pack();
    j["batch_size"] = batch_size_ ? json(*batch_size_) : json(nullptr);
    return j;
  }
  seqio::BatchPosition position_of(const std::string& state) const {
    auto j = parse_state(state);
    check_identity(j["dataset"], identity());
    return seqio::batch_position_from_json(j["position"].dump(), "state");
  }
  void build(std::optional<seqio::BatchPosition> resume) {
    ConverterPtr conv = conv_;
    const seqio::SequenceLengths lengths = o_.sequence_lengths;
    auto convert = [conv, lengths](const std::vector<seqio::Example>& w) { return (*conv)(w, lengths); };
    ds_ = seqio::get_batched_dataset(name_, o_, convert, conv_->packing_window(lengths), batch_size_.value_or(1),
                                     drop_remainder_, resume);
  }
  std::string name_;
  seqio::DatasetOptions o_;
  ConverterPtr conv_;
  std::optional<int> batch_size_;
  bool drop_remainder_;
  std::unique_ptr<seqio::BatchedDataset> ds_;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();  // as ExampleIterator's
};

seqio::DatasetOptions make_options(const std::optional<seqio::SequenceLengths>& lengths, const std::string& split,
                                   bool use_cached, const std::vector<std::string>& cache_dirs, bool shuffle,
                                   std::optional<int64_t> num_epochs, const py::object& shard_info,
                                   const std::optional<uint64_t>& seed, bool trim_output_features, int num_threads,
                                   int block_size, bool stop_on_empty, const std::optional<std::string>& state) {
  seqio::DatasetOptions o;
  if (lengths) {
    for (const auto& [feature, n] : *lengths)
      if (n < 0)
        throw py::value_error("task_feature_lengths['" + feature + "'] is " + std::to_string(n) +
                              "; lengths are >= 0");
    o.sequence_lengths = *lengths;
  }
  o.split = split;
  o.use_cached = use_cached;
  o.cache_dirs = cache_dirs;
  o.shuffle = shuffle;
  // seqio repeats with tf.data's repeat(num_epochs): None and -1 repeat
  // forever. 0 (an empty dataset there) and other counts below 1 are refused
  // rather than read as one epoch.
  if (num_epochs && *num_epochs == -1) num_epochs.reset();
  if (num_epochs && *num_epochs < 1)
    throw py::value_error("num_epochs must be >= 1, or None (or -1) to repeat forever; got " +
                          std::to_string(*num_epochs));
  o.num_epochs = num_epochs;
  o.shard = to_shard(shard_info);
  o.trim_output_features = trim_output_features;
  o.num_threads = num_threads;
  o.block_size = block_size;
  o.stop_on_empty = stop_on_empty;
  resolve_seed(o, seed, state);
  return o;
}

// ---- wrappers of registry objects and vocabularies ------------------------------------

// seqio's DatasetProviderBase: what Tasks and Mixtures share (get_dataset by name).
struct PyProvider {
  std::string name;
};
struct PyTask : PyProvider {
  std::shared_ptr<const seqio::Task> t;
};
struct PyMixture : PyProvider {
  std::shared_ptr<const seqio::Mixture> m;
};
// The name of a Task / Mixture argument, given as the object or its name
// (seqio's functions take either); TypeError naming `what` otherwise.
std::string provider_name(const py::object& x, const std::string& what) {
  if (py::isinstance<PyProvider>(x)) return x.cast<const PyProvider&>().name;
  if (!py::isinstance<py::str>(x))
    throw py::type_error(what + " must be a name or a Task / Mixture, got " + std::string(py::repr(x)));
  return x.cast<std::string>();
}
PyTask wrap_task(std::shared_ptr<const seqio::Task> t) { return PyTask{{t->name()}, std::move(t)}; }
PyMixture wrap_mixture(std::shared_ptr<const seqio::Mixture> m) { return PyMixture{{m->name()}, std::move(m)}; }
struct PyVocabulary {
  std::shared_ptr<const seqio::Vocabulary> v;
};
struct PySentencePieceVocabulary : PyVocabulary {};
struct PyByteVocabulary : PyVocabulary {};
struct PyPassThroughVocabulary : PyVocabulary {};

py::object wrap_vocab(std::shared_ptr<const seqio::Vocabulary> v) {
  if (!v) return py::none();
  if (dynamic_cast<const seqio::SentencePieceVocabulary*>(v.get()))
    return py::cast(PySentencePieceVocabulary{{std::move(v)}});
  if (dynamic_cast<const seqio::ByteVocabulary*>(v.get())) return py::cast(PyByteVocabulary{{std::move(v)}});
  if (dynamic_cast<const seqio::PassThroughVocabulary*>(v.get()))
    return py::cast(PyPassThroughVocabulary{{std::move(v)}});
  return py::cast(PyVocabulary{std::move(v)});
}

// passthrough_features: names, or seqio's {name: FeatureSpec} dict (its keys:
// passed-through features are int32 token features here).
seqio::FeatureConverterOptions converter_options(bool pack, bool apply_length_check, int32_t bos_id,
                                                 const py::object& passthrough) {
  seqio::FeatureConverterOptions fo;
  fo.pack = pack;
  fo.apply_length_check = apply_length_check;
  fo.bos_id = bos_id;
  if (py::isinstance<py::dict>(passthrough)) {
    for (const auto& item : passthrough.cast<py::dict>()) fo.passthrough_features.push_back(py::str(item.first));
  } else if (!passthrough.is_none()) {
    if (py::isinstance<py::str>(passthrough))
      throw py::type_error("passthrough_features must be a list of names or a dict, got the string " +
                           std::string(py::repr(passthrough)));
    fo.passthrough_features = passthrough.cast<std::vector<std::string>>();
  }
  return fo;
}

// Makes the module's symbols global, so that a plugin dlopen()ed later
// resolves the registries here (Python loads extensions RTLD_LOCAL).
void promote_own_symbols() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&promote_own_symbols), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
}

// The Python iterator protocol plus the resumable state, shared by both iterators.
template <class It>
py::class_<It> def_iterator(py::class_<It> c) {
  return c.def("__iter__", [](It& it) -> It& { return it; })
      .def("__next__", &It::next)
      .def("get_state", &It::get_state)
      .def("set_state", &It::set_state, py::arg("state"))
      .def_property_readonly("seed", &It::seed);
}

}  // namespace

PYBIND11_MODULE(_seqio, m) {
  m.doc() = "The t5x.cpp seqio pipeline (C++) for Python; use t5xcpp.seqio";
  py::register_exception<seqio::DataError>(m, "DataError", PyExc_ValueError);

  py::class_<seqio::ShardInfo>(m, "ShardInfo")
      .def(py::init([](int index, int num_shards) { return to_shard(py::make_tuple(index, num_shards)); }),
           py::arg("index"), py::arg("num_shards"))
      .def_readonly("index", &seqio::ShardInfo::index)
      .def_readonly("num_shards", &seqio::ShardInfo::num_shards)
      .def("__repr__", [](const seqio::ShardInfo& s) {
        return "ShardInfo(index=" + std::to_string(s.index) + ", num_shards=" + std::to_string(s.num_shards) + ")";
      });

  // Vocabularies.
  py::class_<PyVocabulary>(m, "Vocabulary")
      .def("encode", [](const PyVocabulary& v, const std::string& s) { return v.v->encode(s); }, py::arg("s"))
      .def("decode", [](const PyVocabulary& v, const seqio::Tokens& ids) { return v.v->decode(ids); }, py::arg("ids"))
      .def_property_readonly("pad_id", [](const PyVocabulary& v) { return v.v->pad_id(); })
      .def_property_readonly("eos_id", [](const PyVocabulary& v) { return v.v->eos_id(); })
      .def_property_readonly("unk_id", [](const PyVocabulary& v) { return v.v->unk_id(); })
      .def_property_readonly("extra_ids", [](const PyVocabulary& v) { return v.v->extra_ids(); })
      .def_property_readonly("vocab_size", [](const PyVocabulary& v) { return v.v->vocab_size(); })
      .def_property_readonly("base_vocab_size", [](const PyVocabulary& v) { return v.v->base_vocab_size(); })
      .def_property_readonly("spec", [](const PyVocabulary& v) { return v.v->spec(); })
      .def("__eq__", [](const PyVocabulary& a, const PyVocabulary& b) { return *a.v == *b.v; })
      .def("__repr__", [](const PyVocabulary& v) { return "<Vocabulary " + v.v->spec() + ">"; });
  py::class_<PySentencePieceVocabulary, PyVocabulary>(m, "SentencePieceVocabulary")
      .def(py::init([](const std::string& path, int extra_ids) {
             return PySentencePieceVocabulary{{std::make_shared<seqio::SentencePieceVocabulary>(path, extra_ids)}};
           }),
           py::arg("sentencepiece_model_file"), py::arg("extra_ids") = 0)
      .def_property_readonly("sentencepiece_model_file", [](const PySentencePieceVocabulary& v) {
        return static_cast<const seqio::SentencePieceVocabulary&>(*v.v).model_path();
      });
  py::class_<PyByteVocabulary, PyVocabulary>(m, "ByteVocabulary")
      .def(py::init([](int extra_ids) { return PyByteVocabulary{{std::make_shared<seqio::ByteVocabulary>(extra_ids)}}; }),
           py::arg("extra_ids") = 0);
  py::class_<PyPassThroughVocabulary, PyVocabulary>(m, "PassThroughVocabulary")
      .def(py::init([](int size, std::optional<int32_t> eos_id) {
             return PyPassThroughVocabulary{{std::make_shared<seqio::PassThroughVocabulary>(size, eos_id)}};
           }),
           py::arg("size"), py::arg("eos_id") = std::nullopt);
  m.def("make_vocabulary", [](const std::string& spec) { return wrap_vocab(seqio::make_vocabulary(spec)); },
        py::arg("spec"), "'sentencepiece:PATH[:extra_ids=N]', 'byte[:extra_ids=N]' or 'passthrough:SIZE[:eos_id=N]'");

  // Feature converters.
  py::class_<seqio::FeatureConverter, std::shared_ptr<seqio::FeatureConverter>>(m, "FeatureConverter")
      .def_property_readonly("name", &seqio::FeatureConverter::name)
      .def_property_readonly("pack", &seqio::FeatureConverter::pack)
      .def_property_readonly("bos_id", &seqio::FeatureConverter::bos_id)
      .def_property_readonly("TASK_FEATURES", &seqio::FeatureConverter::task_features)
      .def(
          "get_model_feature_lengths",
          [](const seqio::FeatureConverter& c, const seqio::SequenceLengths& lengths) {
            for (const std::string& f : c.task_features())
              if (!lengths.count(f))  // seqio: KeyError on the missing feature
                throw py::key_error("task_feature_lengths has no '" + f + "' (" + c.name() + " takes " +
                                    join_names(c.task_features()) + ")");
            // seqio lists the passed-through features with their task lengths too.
            seqio::SequenceLengths out = c.get_model_feature_lengths(lengths);
            for (const std::string& f : c.options().passthrough_features)
              if (lengths.count(f)) out[f] = lengths.at(f);
            return out;
          },
          py::arg("task_feature_lengths"))
      .def("packing_window", &seqio::FeatureConverter::packing_window, py::arg("task_feature_lengths"))
      .def(
          "__call__",
          [](const seqio::FeatureConverter& c, const py::list& examples, const seqio::SequenceLengths& lengths) {
            std::vector<seqio::Example> in;
            for (size_t i = 0; i < examples.size(); ++i) in.push_back(dict_to_example(examples[i], i));
            py::list out;
            for (const auto& e : c(in, lengths)) out.append(example_to_dict(e));
            return out;
          },
          py::arg("examples"), py::arg("task_feature_lengths"), "Converts a list of examples (dicts) at once.");
  // seqio.FeatureConverter's arguments (use_custom_packing_ops is accepted; packing is the same).
  const py::arg_v a_pack = py::arg("pack") = true, a_custom = py::arg("use_custom_packing_ops") = false,
                  a_check = py::arg("apply_length_check") = true, a_bos = py::arg("bos_id") = 0,
                  a_pass = py::arg("passthrough_features") = py::none();
  using Passthrough = py::object;
  py::class_<seqio::EncDecFeatureConverter, seqio::FeatureConverter, std::shared_ptr<seqio::EncDecFeatureConverter>>(
      m, "EncDecFeatureConverter")
      .def(py::init([](bool pack, bool, bool check, int32_t bos, const Passthrough& p) {
             return std::make_shared<seqio::EncDecFeatureConverter>(converter_options(pack, check, bos, p));
           }),
           a_pack, a_custom, a_check, a_bos, a_pass);
  py::class_<seqio::LMFeatureConverter, seqio::FeatureConverter, std::shared_ptr<seqio::LMFeatureConverter>>(
      m, "LMFeatureConverter")
      .def(py::init([](bool pack, bool, bool check, int32_t bos, const Passthrough& p) {
             return std::make_shared<seqio::LMFeatureConverter>(converter_options(pack, check, bos, p));
           }),
           a_pack, a_custom, a_check, a_bos, a_pass);
  py::class_<seqio::PrefixLMFeatureConverter, seqio::LMFeatureConverter,
             std::shared_ptr<seqio::PrefixLMFeatureConverter>>(m, "PrefixLMFeatureConverter")
      .def(py::init([](bool loss_on_targets_only, bool pack, bool, bool check, int32_t bos, const Passthrough& p) {
             return std::make_shared<seqio::PrefixLMFeatureConverter>(converter_options(pack, check, bos, p),
                                                                      loss_on_targets_only);
           }),
           py::arg("loss_on_targets_only") = true, a_pack, a_custom, a_check, a_bos, a_pass);
  py::class_<seqio::EncoderFeatureConverter, seqio::FeatureConverter,
             std::shared_ptr<seqio::EncoderFeatureConverter>>(m, "EncoderFeatureConverter")
      .def(py::init([](int32_t mask_id, bool pack, bool, bool check, int32_t bos, const Passthrough& p) {
             return std::make_shared<seqio::EncoderFeatureConverter>(mask_id, converter_options(pack, check, bos, p));
           }),
           py::arg("mask_id"), a_pack, a_custom, a_check, a_bos, a_pass);

  // Iterators.
  def_iterator(py::class_<ExampleIterator>(m, "ExampleIterator")).def("stats", &ExampleIterator::stats);
  def_iterator(py::class_<BatchIterator>(m, "BatchIterator"))
      .def_property_readonly("batches", &BatchIterator::batches);

  // Tasks and Mixtures.
  py::class_<seqio::Feature>(m, "Feature")
      .def_property_readonly("vocabulary", [](const seqio::Feature& f) { return wrap_vocab(f.vocabulary); })
      .def_readonly("add_eos", &seqio::Feature::add_eos)
      .def_readonly("required", &seqio::Feature::required)
      .def_property_readonly("dtype", [](const seqio::Feature& f) { return std::string(seqio::dtype_name(f.dtype)); })
      .def_readonly("rank", &seqio::Feature::rank);

  // Task.get_dataset's arguments (seqio's, plus the pipeline's threads/blocks and resume points).
  const py::arg_v d_len = py::arg("sequence_length") = py::none(), d_split = py::arg("split") = "train",
                  d_cached = py::arg("use_cached") = false, d_dirs = py::arg("cache_dirs") = std::vector<std::string>{},
                  d_shuffle = py::arg("shuffle") = true, d_seed = py::arg("seed") = py::none(),
                  d_shard = py::arg("shard_info") = py::none(), d_epochs = py::arg("num_epochs") = 1,
                  d_trim = py::arg("trim_output_features") = true, d_threads = py::arg("num_threads") = 1,
                  d_block = py::arg("block_size") = 1000, d_start = py::arg("start") = 0,
                  d_state = py::arg("state") = py::none();
  auto provider_dataset = [](const PyProvider& p, const std::optional<seqio::SequenceLengths>& lengths,
                             const std::string& split, bool use_cached, const std::vector<std::string>& cache_dirs,
                             bool shuffle, std::optional<uint64_t> seed, const py::object& shard_info,
                             std::optional<int64_t> num_epochs, bool trim, int threads, int block_size, int64_t start,
                             const std::optional<std::string>& state, bool stop_on_empty) {
    auto o = make_options(lengths, split, use_cached, cache_dirs, shuffle, num_epochs, shard_info, seed, trim, threads,
                          block_size, stop_on_empty, state);
    o.start = state ? 0 : start;
    return std::make_unique<ExampleIterator>(p.name, o, state);
  };
  py::class_<PyProvider>(m, "DatasetProviderBase")
      .def_readonly("name", &PyProvider::name)
      .def("get_dataset", provider_dataset, d_len, d_split, d_cached, d_dirs, d_shuffle, d_seed, d_shard, d_epochs,
           d_trim, d_threads, d_block, d_start, d_state, py::arg("stop_on_empty") = true,
           "Preprocessed examples (stop_on_empty: mixtures only).");
  py::class_<PyTask, PyProvider>(m, "Task")
      .def_property_readonly("splits", [](const PyTask& t) { return t.t->splits(); })
      .def_property_readonly("output_features", [](const PyTask& t) { return t.t->output_features(); })
      .def_property_readonly("metric_names", [](const PyTask& t) { return t.t->metric_names(); })
      .def_property_readonly("supports_caching", [](const PyTask& t) { return t.t->supports_caching(); })
      .def(
          "postprocess_fn",
          [](const PyTask& t, const std::string& decoded, const py::dict& ex, bool is_target) {
            return t.t->postprocess(decoded, dict_to_example(ex, 0), is_target);
          },
          py::arg("decoded"), py::arg("example") = py::dict(), py::arg("is_target") = false)
      .def("__repr__", [](const PyTask& t) { return "<Task " + t.t->name() + ">"; });
  py::class_<PyMixture, PyProvider>(m, "Mixture")
      .def_property_readonly("tasks",
                             [](const PyMixture& x) {
                               std::vector<PyTask> out;
                               for (auto& t : x.m->tasks()) out.push_back(wrap_task(t));
                               return out;
                             })
      .def(
          "get_rate",
          [](const PyMixture& x, const PyTask& t) {
            // seqio 0.0.20 gives a task outside the mixture the rate 0.0.
            for (const auto& member : x.m->tasks())
              if (member->name() == t.t->name()) return x.m->get_rate(*t.t);
            return 0.0;
          },
          py::arg("task"))
      .def_property_readonly("total_rate", [](const PyMixture& x) { return x.m->total_rate(); })
      // seqio: every member has the same output features; the first task's.
      .def_property_readonly("output_features",
                             [](const PyMixture& x) { return seqio::get_subtasks(x.m->name()).at(0)->output_features(); })
      // seqio's Mixture.get_dataset repeats by default (num_epochs=None), its
      // Task.get_dataset reads once.
      .def("get_dataset", provider_dataset, d_len, d_split, d_cached, d_dirs, d_shuffle, d_seed, d_shard,
           py::arg("num_epochs") = py::none(), d_trim, d_threads, d_block, d_start, d_state,
           py::arg("stop_on_empty") = true, "Preprocessed examples of the mixture (num_epochs=None: forever).")
      .def("__repr__", [](const PyMixture& x) { return "<Mixture " + x.m->name() + ">"; });

  m.def(
      "get_mixture_or_task",
      [](const std::string& name) -> py::object {
        auto v = seqio::get_mixture_or_task(name);
        if (auto* t = std::get_if<std::shared_ptr<const seqio::Task>>(&v)) return py::cast(wrap_task(*t));
        return py::cast(wrap_mixture(std::get<std::shared_ptr<const seqio::Mixture>>(v)));
      },
      py::arg("name"));
  m.def(
      "get_subtasks",
      [](const py::object& task_or_mixture) {
        std::vector<PyTask> out;
        for (auto& t : seqio::get_subtasks(provider_name(task_or_mixture, "get_subtasks: task_or_mixture")))
          out.push_back(wrap_task(t));
        return out;
      },
      py::arg("task_or_mixture"), "The leaf Tasks of a Task or Mixture (nested mixtures expanded).");
  m.def("task_names", &seqio::TaskRegistry::names);
  m.def("mixture_names", &seqio::MixtureRegistry::names);
  m.def(
      "get_dataset",
      [](const py::object& task, const seqio::SequenceLengths& lengths, const py::object& conv,
         const std::string& split, bool use_cached, bool shuffle, std::optional<int64_t> num_epochs,
         const py::object& shard_info, bool /*verbose: seqio's logging*/, std::optional<uint64_t> seed,
         std::optional<int> batch_size, bool trim, const std::vector<std::string>& cache_dirs, bool drop_remainder,
         int threads, int block_size, bool stop_on_empty, const std::optional<std::string>& state) {
        const std::string name = provider_name(task, "get_dataset: mixture_or_task_name");
        auto o = make_options(lengths, split, use_cached, cache_dirs, shuffle, num_epochs, shard_info, seed, trim,
                              threads, block_size, stop_on_empty, state);
        if (!conv.is_none() && !py::isinstance<seqio::FeatureConverter>(conv))
          throw py::type_error("get_dataset: feature_converter must be a FeatureConverter (e.g. "
                               "EncDecFeatureConverter(pack=True)), got " +
                               std::string(py::str(py::type::of(conv).attr("__name__"))) + " " +
                               std::string(py::repr(conv)));
        ConverterPtr c = conv.is_none() ? nullptr : conv.cast<std::shared_ptr<seqio::FeatureConverter>>();
        return std::make_unique<BatchIterator>(name, o, c, batch_size, drop_remainder, state);
      },
      // seqio.get_dataset's parameters in its order and with its defaults
      // (shuffle=False), then the C++ pipeline's own.
      py::arg("mixture_or_task_name"), py::arg("task_feature_lengths"), py::arg("feature_converter") = py::none(),
      py::arg("dataset_split") = "train", py::arg("use_cached") = false, py::arg("shuffle") = false,
      py::arg("num_epochs") = 1, py::arg("shard_info") = py::none(), py::arg("verbose") = true,
      py::arg("seed") = std::nullopt, py::arg("batch_size") = std::nullopt, py::arg("trim_output_features") = true,
      py::arg("cache_dirs") = std::vector<std::string>{}, py::arg("drop_remainder") = true,
      py::arg("num_threads") = 1, py::arg("block_size") = 1000, py::arg("stop_on_empty") = true,
      py::arg("state") = std::nullopt);

  // Modules and built-in tasks.
  m.def(
      "load_module",
      [](const std::string& path) {
#ifdef T5X_HAVE_TASK_FILES
        if (path.ends_with(".gin")) {
          t5x::task_file::load_module(path);
          return;
        }
#endif
        promote_own_symbols();
        seqio::load_shared_module(path);
      },
      py::arg("path"),
      "Registers the Tasks and Mixtures of a gin task file (.gin, docs/seqio.md) or dlopen()s a "
      "SEQIO_TASK_MODULE shared library, as `seqio --module PATH` does.");
  m.def("register_builtin_tasks", &seqio::register_builtin_tasks);
  m.def("register_bible_tasks", []() -> std::pair<bool, std::string> {
#ifdef T5X_HAVE_BIBLE_TASKS
    std::string why;
    const bool ok = t5x::bible::register_bible_tasks(&why);
    return {ok, why};
#else
    return {false, "this module was built without the Bible tasks (examples/bible)"};
#endif
  });
  m.def("data_root", &seqio::data_root);

  // Metrics (seqio/metrics/metrics.h): values x 100 as t5.evaluation.metrics.
  auto metrics = m.def_submodule("metrics", "t5.evaluation.metrics functions by name");
  metrics.def(
      "compute",
      [](const std::string& name, const std::vector<std::string>& targets, const std::vector<std::string>& predictions) {
        return seqio::metrics::compute(name, targets, predictions);
      },
      py::arg("name"), py::arg("targets"), py::arg("predictions"));
  metrics.def(
      "compute",
      [](const std::string& name, const std::vector<std::vector<std::string>>& targets,
         const std::vector<std::string>& predictions) { return seqio::metrics::compute(name, targets, predictions); },
      py::arg("name"), py::arg("targets"), py::arg("predictions"));
  metrics.def("metric_names", &seqio::metrics::metric_names);

  seqio::register_builtin_tasks();
  seqio::load_task_modules();
}
