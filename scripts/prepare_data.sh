#!/usr/bin/env bash
# Prepares the main job's real data (docs/data.md), once: later calls find the
# cached result and return at once. Idempotent; safe to interrupt (the result
# is assembled in a temporary folder and renamed into place).
#
#   scripts/prepare_data.sh [DATA_DIR]     (default: data/)
#
# Needs the Debian packages diatheke, sword-text-{web,kjv,sparv}, wordnet-base
# and sentencepiece (installed by scripts/deps.sh --data).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${1:-data}
VOCAB_SIZE=${VOCAB_SIZE:-8000}
FORMAT_VERSION=2   # bump when the cleaning rules or outputs change

scripts/deps.sh --data
BUILD_DIR=${BUILD_DIR:-build}
TARGETS=t5x_prepare_bible scripts/build.sh >/dev/null

versions=$(dpkg-query -W -f='${Package}=${Version} ' sword-text-web sword-text-kjv sword-text-sparv wordnet-base sentencepiece)
fingerprint="format=$FORMAT_VERSION vocab=$VOCAB_SIZE $versions $(sha256sum examples/bible/*.cpp examples/bible/*.h | sha256sum | cut -c1-16)"
if [[ -f "$DATA_DIR/COMPLETED" && "$(cat "$DATA_DIR/COMPLETED")" == "$fingerprint" ]]; then
  echo "[prepare] $DATA_DIR is up to date"
  exit 0
fi

tmp="$DATA_DIR.tmp-$$"
rm -rf "$tmp"
mkdir -p "$tmp/raw" "$tmp/bible" "$tmp/wordnet" "$tmp/vocab"
trap 'rm -rf "$tmp"' EXIT
for module in engWEB2015eb engKJV2006eb spaRV1909eb; do
  echo "[prepare] exporting $module with diatheke"
  diatheke -b "$module" -k Gen-Rev > "$tmp/raw/$module.txt"
done
echo "[prepare] cleaning and aligning verses, reading WordNet glosses"
"$BUILD_DIR/bin/t5x_prepare_bible" --web "$tmp/raw/engWEB2015eb.txt" --kjv "$tmp/raw/engKJV2006eb.txt" \
  --rv "$tmp/raw/spaRV1909eb.txt" --wordnet /usr/share/wordnet --out "$tmp" > /dev/null
echo "[prepare] training the SentencePiece vocabulary ($VOCAB_SIZE pieces; about a minute)"
spm_train --input="$tmp/spm_input.txt" --model_prefix="$tmp/vocab/bible_spm" --vocab_size="$VOCAB_SIZE" \
  --model_type=unigram --character_coverage=1.0 --pad_id=0 --eos_id=1 --unk_id=2 --bos_id=-1 \
  --input_sentence_size=2000000 --shuffle_input_sentence=true --random_seed=42 --num_threads=2 \
  --minloglevel=2 > "$tmp/vocab/spm_train.log" 2>&1
rm -f "$tmp/spm_input.txt"
echo "$fingerprint" > "$tmp/COMPLETED"
rm -rf "$DATA_DIR"
mv "$tmp" "$DATA_DIR"
trap - EXIT
echo "[prepare] done: $DATA_DIR ($(cat "$DATA_DIR/stats.json" | tr -d ' \n' | cut -c1-200)...)"
