#include "seqio/feature_converters/packing.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace seqio::utils {
namespace {

Tokens& tokens_or_throw(Example& x, const std::string& key, const char* op, size_t index) {
  auto it = x.find(key);
  if (it == x.end())
    throw std::invalid_argument(std::string("[") + op + "] example " + std::to_string(index) +
                                " has no feature '" + key + "'");
  auto* t = std::get_if<Tokens>(&it->second);
  if (t == nullptr)
    throw std::invalid_argument(std::string("[") + op + "] feature '" + key + "' of example " +
                                std::to_string(index) + " is not an int32 token sequence");
  return *t;
}

}  // namespace

std::vector<Example> trim_and_pad_dataset(const std::vector<Example>& ds,
                                          const SequenceLengths& feature_lengths) {
  std::vector<Example> out = ds;
  for (size_t i = 0; i < out.size(); ++i) {
    for (const auto& [key, L] : feature_lengths) {
      if (L < 0) throw std::invalid_argument("[trim_and_pad_dataset] negative length for " + key);
      if (out[i].find(key) == out[i].end()) continue;
      Tokens& t = tokens_or_throw(out[i], key, "trim_and_pad_dataset", i);
      t.resize(static_cast<size_t>(L), 0);
    }
  }
  return out;
}

int64_t packing_window(const SequenceLengths& feature_lengths) {
  int64_t w = 0;
  for (const auto& [k, L] : feature_lengths) w = std::max<int64_t>(w, L);
  return std::max<int64_t>(w, 1);
}

std::vector<Example> trim_and_pack_dataset(const std::vector<Example>& ds,
                                           const SequenceLengths& feature_lengths) {
  if (feature_lengths.empty())
    throw std::invalid_argument("[trim_and_pack_dataset] no feature lengths given");
  for (const auto& [key, L] : feature_lengths)
    if (L < 1) throw std::invalid_argument("[trim_and_pack_dataset] length of " + key + " < 1");
  const size_t window = static_cast<size_t>(packing_window(feature_lengths));
  const size_t nf = feature_lengths.size();
  std::vector<std::string> keys;
  std::vector<size_t> lens;
  for (const auto& [k, L] : feature_lengths) {
    keys.push_back(k);
    lens.push_back(static_cast<size_t>(L));
  }

  std::vector<Example> out;
  std::vector<Tokens> row_tok(nf), row_pos(nf);
  auto flush = [&]() {
    Example packed;
    for (size_t f = 0; f < nf; ++f) {
      Tokens tok = row_tok[f], pos = row_pos[f];
      tok.resize(lens[f], 0);
      pos.resize(lens[f], 0);
      Tokens seg(lens[f], 0);
      int32_t count = 0;
      for (size_t j = 0; j < lens[f]; ++j) {
        if (pos[j] == 0) ++count;
        seg[j] = tok[j] != 0 ? count : 0;
      }
      packed[keys[f]] = std::move(tok);
      packed[keys[f] + "_positions"] = std::move(pos);
      packed[keys[f] + "_segment_ids"] = std::move(seg);
      row_tok[f].clear();
      row_pos[f].clear();
    }
    out.push_back(std::move(packed));
  };

  std::vector<const Tokens*> seqs(nf);
  std::vector<size_t> take(nf);
  for (size_t w0 = 0; w0 < ds.size(); w0 += window) {
    const size_t w1 = std::min(ds.size(), w0 + window);
    for (size_t i = w0; i < w1; ++i) {
      bool fits = true;
      for (size_t f = 0; f < nf; ++f) {
        auto it = ds[i].find(keys[f]);
        if (it == ds[i].end())
          throw std::invalid_argument("[trim_and_pack_dataset] example " + std::to_string(i) +
                                      " has no feature '" + keys[f] + "'");
        seqs[f] = std::get_if<Tokens>(&it->second);
        if (seqs[f] == nullptr)
          throw std::invalid_argument("[trim_and_pack_dataset] feature '" + keys[f] +
                                      "' of example " + std::to_string(i) +
                                      " is not an int32 token sequence");
        // Trim to the length first, then keep the first count_nonzero tokens.
        const size_t trimmed = std::min(seqs[f]->size(), lens[f]);
        take[f] = static_cast<size_t>(
            std::count_if(seqs[f]->begin(), seqs[f]->begin() + static_cast<std::ptrdiff_t>(trimmed),
                          [](int32_t t) { return t != 0; }));
        if (row_tok[f].size() + take[f] > lens[f]) fits = false;
      }
      if (!fits) flush();
      for (size_t f = 0; f < nf; ++f) {
        row_tok[f].insert(row_tok[f].end(), seqs[f]->begin(),
                          seqs[f]->begin() + static_cast<std::ptrdiff_t>(take[f]));
        for (size_t j = 0; j < take[f]; ++j) row_pos[f].push_back(static_cast<int32_t>(j));
      }
    }
    flush();
  }
  return out;
}

Tokens make_autoregressive_inputs(const Tokens& targets, const Tokens* sequence_id,
                                  int32_t bos_id) {
  Tokens out(targets.size());
  if (targets.empty()) return out;
  out[0] = bos_id;
  for (size_t i = 1; i < targets.size(); ++i) out[i] = targets[i - 1];
  if (sequence_id != nullptr) {
    if (sequence_id->size() != targets.size())
      throw std::invalid_argument("[make_autoregressive_inputs] sequence_id length " +
                                  std::to_string(sequence_id->size()) + " != targets length " +
                                  std::to_string(targets.size()));
    for (size_t i = 1; i < targets.size(); ++i)
      if ((*sequence_id)[i] != (*sequence_id)[i - 1]) out[i] = bos_id;
  }
  return out;
}

}  // namespace seqio::utils
