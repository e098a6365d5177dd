// The main job's seqio Tasks and Mixture over the prepared corpora
// (docs/data.md). Data live in $T5X_DATA_DIR (default "data", relative to the
// working directory), made by scripts/prepare_data.sh.
//
// bible_kjv_to_web and wordnet_define need C++ steps and are defined here; the
// others are declared in examples/bible/tasks.gin (a task file, read by
// register_bible_tasks after these).
//
//   bible_translate_en_es   WEB -> RV1909, "translate English to Spanish: ..."   bleu, sequence_accuracy
//   bible_translate_es_en   RV1909 -> WEB, "translate Spanish to English: ..."   bleu, sequence_accuracy
//   bible_kjv_to_web        KJV -> WEB, "modernize: ..."                          bleu, sequence_accuracy
//   bible_span_corruption   T5 span corruption over all three texts (monolingual verses)
//   wordnet_define          "define: WORD (POS)" -> WordNet definition            rouge, bleu
//   bible_translation       mixture of the three translation tasks, equal rates
//
// All use SentencePieceVocabulary(DATA/vocab/bible_spm.model, extra_ids=100).
#pragma once
#include <string>

namespace t5x::bible {

// examples/bible/tasks.gin under seqio::data_root().
std::string task_file();

// $T5X_DATA_DIR or "data".
std::string data_dir();

// Registers the tasks and the mixture (idempotent). Returns false, registering
// nothing, when the prepared data are missing; `why` then says what to run.
bool register_bible_tasks(std::string* why = nullptr);

}  // namespace t5x::bible
