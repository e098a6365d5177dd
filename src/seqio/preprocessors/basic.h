// Per-example seqio preprocessors: rekey, tokenize, append_eos(_after_trim),
// truncate_inputs_left and output-feature trimming.
//
// Semantics follow seqio/preprocessors.py (seqio 0.0.20) and the trimming step
// of seqio Task.get_dataset; docs/seqio-preprocessors.md lists each rule with
// its source. All functions are pure: they take an Example and explicit
// arguments and return a new Example. Token id 0 is padding everywhere.
//
// Only rank-1 features exist here (seqio's rank>1 / ragged forms of
// append_eos are out of scope because Example holds 1-D Tokens).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "seqio/example.h"
#include "seqio/feature.h"

namespace seqio::preprocessors {

// Output features and sequence lengths are seqio's (seqio/feature.h):
// Feature.vocabulary provides encode / eos_id / vocab_size, Feature.add_eos
// says whether EOS belongs at the end. A feature absent from SequenceLengths
// has no length limit (seqio's None).

// Feature's EOS id; throws std::invalid_argument naming the feature and the
// calling op if the feature has no vocabulary or the vocabulary has no EOS.
int32_t eos_id_of(const Feature& f, const std::string& key, const char* op);

// rekey(x, key_map): the output has exactly the keys of key_map; new <- x[old].
// An empty old key (seqio: None or "") yields the empty string. An empty
// key_map returns x unchanged. Throws std::invalid_argument naming the key if
// x lacks an old key (Python raises KeyError).
Example rekey(const Example& x, const std::map<std::string, std::string>& key_map);

// tokenize(x, output_features, copy_pretokenized, with_eos): every key of x that
// is an output feature must hold text; it is encoded with the feature's
// vocabulary (Vocabulary::encode, which never adds EOS), and (if
// copy_pretokenized) the text is kept under "<key>_pretokenized". With
// with_eos and Feature.add_eos, EOS is appended. Other keys pass through.
// Throws std::invalid_argument if an output feature in x is not text or the
// feature has no vocabulary.
Example tokenize(const Example& x, const OutputFeatures& output_features,
                 bool copy_pretokenized = true, bool with_eos = false);
// seqio.preprocessors.tokenize_and_append_eos.
inline Example tokenize_and_append_eos(const Example& x, const OutputFeatures& f,
                                       bool copy_pretokenized = true) {
  return tokenize(x, f, copy_pretokenized, /*with_eos=*/true);
}

// append_eos: for each output feature with add_eos that x holds as Tokens,
// append eos_id. Everything else is untouched.
Example append_eos(const Example& x, const OutputFeatures& output_features);

// append_eos_after_trim: as append_eos, but if sequence_lengths has a length L
// for the feature, first keep the first L-1 tokens, so the result ends in EOS
// and has at most L tokens. Without a length it is plain append_eos.
// Throws std::invalid_argument if L < 1.
Example append_eos_after_trim(const Example& x, const OutputFeatures& output_features,
                              const SequenceLengths& sequence_lengths);

// truncate_inputs_left: keep the last sequence_lengths["inputs"] tokens of
// "inputs". No-op without an "inputs" length. As in seqio (Python slice
// x[-L:]), L == 0 keeps the whole sequence.
Example truncate_inputs_left(const Example& x, const SequenceLengths& sequence_lengths);

// What trimming removed: per feature, how many examples were cut and how many
// tokens were dropped.
struct TrimCounts {
  std::map<std::string, int64_t> examples;
  std::map<std::string, int64_t> tokens;
  int64_t total_examples() const;
  int64_t total_tokens() const;
  void merge(const TrimCounts& other);
};

// Task.get_dataset's trim step (trim_output_features=True): every Tokens
// feature named in sequence_lengths is sliced to its length. No padding.
// Features not in sequence_lengths, and non-token features, are untouched.
// Adds what was cut to *counts when given (seqio trims silently; we report).
Example trim_to_lengths(const Example& x, const SequenceLengths& sequence_lengths,
                        TrimCounts* counts = nullptr);

}  // namespace seqio::preprocessors
