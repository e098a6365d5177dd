#!/usr/bin/env bash
# The plugin example against the installed package (issue 20, item 2):
#   1. `cmake --install` of this build into a fresh prefix gives the programs,
#      the seqio headers and the CMake package t5xcpp;
#   2. examples/plugin, copied out of the source tree, configures and builds
#      with find_package(t5xcpp) alone (CMAKE_PREFIX_PATH=prefix; no include
#      path into the source tree);
#   3. the plugin holds no copy of seqio: its seqio symbols are undefined and
#      the installed programs export every public seqio function;
#   4. the installed `seqio --module` (a path, or a bare name in the working
#      directory) shows the plugin's task, made by its C++
#      preprocessor (inputs "reverse: LINE", targets the words reversed);
#   5. the installed `t5x train` loads it through gin's MIXTURE_OR_TASK_MODULE
#      and the tiny T5's loss falls over 8 steps of that task.
# Usage, from the source root: plugin_out_of_tree_test.sh BUILD_DIR CMAKE
set -uo pipefail
BUILD=$(cd "$1" && pwd)
CMAKE=$2
SRC=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/t5x_plugin.XXXXXX")
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
die() { echo "FAIL: $*"; echo "work files kept in $WORK"; exit 1; }
trap 'if ((fails == 0)); then rm -rf "$WORK"; else echo "work files kept in $WORK"; fi' EXIT

P=$WORK/prefix
"$CMAKE" --install "$BUILD" --prefix "$P" >"$WORK/install.log" 2>&1 || { cat "$WORK/install.log"; die "cmake --install failed"; }
for f in bin/t5x bin/seqio include/t5xcpp/seqio/task.h include/t5xcpp/seqio/preprocessors/task_steps.h \
  lib/cmake/t5xcpp/t5xcppConfig.cmake lib/cmake/t5xcpp/t5xcppConfigVersion.cmake lib/libseqio_core.a; do
  [[ -e $P/$f ]] || fail "the install lacks $f"
done
grep -rqF "$SRC" "$P/lib/cmake/t5xcpp" && fail "the installed CMake package names the source tree"

cp -r "$SRC/examples/plugin" "$WORK/plugin_src"
# A cross build (scripts/arm64.sh) builds the plugin with its toolchain too.
toolchain=()
tc=$(sed -n 's/^CMAKE_TOOLCHAIN_FILE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
if [[ -n $tc ]]; then
  [[ $tc == /* ]] || { [[ -f $BUILD/$tc ]] && tc=$BUILD/$tc || tc=$SRC/$tc; }
  toolchain=(-DCMAKE_TOOLCHAIN_FILE="$tc")
fi
"$CMAKE" -S "$WORK/plugin_src" -B "$WORK/plugin_build" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${toolchain[@]}" >"$WORK/configure.log" 2>&1 ||
  { cat "$WORK/configure.log"; die "examples/plugin does not configure against the installed package"; }
"$CMAKE" --build "$WORK/plugin_build" >"$WORK/build.log" 2>&1 ||
  { cat "$WORK/build.log"; die "examples/plugin does not build against the installed package"; }
LIB=$WORK/plugin_build/libmyplugin.so
[[ -f $LIB ]] || die "no $LIB"
cc=$WORK/plugin_build/compile_commands.json
grep -qF -- "$P/include/t5xcpp" "$cc" || fail "the plugin is not compiled against $P/include/t5xcpp"
grep -qF -- "$SRC/src" "$cc" && fail "the plugin's compile line reaches into the source tree"

# One seqio: nothing of it defined in the plugin (inline functions of the
# headers are weak, and the program's exported copies win), all of it in the
# programs. (nm output goes to files: grep -q under pipefail fails on SIGPIPE.)
nm -D --defined-only "$LIB" | c++filt >"$WORK/plugin.defined"
nm -D --undefined-only "$LIB" | c++filt >"$WORK/plugin.undefined"
grep -E '^[0-9a-f]+ [TDB] seqio::' "$WORK/plugin.defined" && fail "the plugin defines seqio functions or data (above)"
for s in 'seqio::TaskRegistry::add' 'seqio::preprocessors::task::tokenize' 'seqio::register_task_module'; do
  grep -qF "$s" "$WORK/plugin.undefined" || fail "the plugin does not take $s from the program"
done
readelf -d "$LIB" >"$WORK/plugin.dynamic"
grep NEEDED "$WORK/plugin.dynamic" | grep -i seqio && fail "the plugin needs a seqio shared library (above)"
api=$(nm -g --defined-only "$P"/lib/libseqio_*.a 2>/dev/null | awk '$2 == "T" {print $3}' | sort -u)
(($(wc -l <<<"$api") > 100)) || fail "too few public seqio functions found in the installed libraries"
for prog in t5x seqio; do
  missing=$(comm -23 <(echo "$api") <(nm -D --defined-only "$P/bin/$prog" | awk '{print $3}' | sort -u) | wc -l)
  ((missing == 0)) || fail "$prog does not export $missing public seqio functions"
done

# The task, as the installed `seqio` shows it with the plugin.
export SEQIO_DATA_ROOT=$SRC
"$P/bin/seqio" --module "$LIB" list >"$WORK/list" 2>&1 || { cat "$WORK/list"; die "seqio --module list failed"; }
grep -q '^task  *gpl3_reverse_words ' "$WORK/list" || fail "seqio list misses gpl3_reverse_words"
# A bare file name is the file in the working directory (dlopen() alone would search the library path).
(cd "$WORK/plugin_build" && "$P/bin/seqio" --module libmyplugin.so list) >"$WORK/list2" 2>&1
grep -q '^task  *gpl3_reverse_words ' "$WORK/list2" || { cat "$WORK/list2"; fail "seqio --module libmyplugin.so (bare name) failed"; }
"$P/bin/seqio" --module "$LIB" show gpl3_reverse_words -n 2 >"$WORK/show" 2>"$WORK/show.err" ||
  { cat "$WORK/show.err"; die "seqio show gpl3_reverse_words failed"; }
line=$(head -n 1 "$SRC/tests/data/seqio/gpl3_lines.train-0.txt")
reversed=$(tr -s ' ' '\n' <<<"$line" | tac | paste -sd ' ')
first=$(head -n 1 "$WORK/show")
[[ $first == *"\"inputs_pretokenized\":\"reverse: $line\""* ]] || fail "inputs of the first example: $first"
[[ $first == *"\"targets_pretokenized\":\"$reversed\""* ]] || fail "targets of the first example (want '$reversed'): $first"
[[ $first == *'"targets":['*',1]'* ]] || fail "the targets are not tokens ending in EOS (1): $first"

# Training on it with the installed `t5x`, the plugin named in gin.
bindings=("MODEL_DIR = '$WORK/model'" "MIXTURE_OR_TASK_NAME = 'gpl3_reverse_words'"
  "MIXTURE_OR_TASK_MODULE = '$LIB'" "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}"
  "TRAIN_STEPS = 8" "BATCH_SIZE = 8" "USE_CACHED_TASKS = False" "RANDOM_SEED = 7" "ACTIVATION_DTYPE = 'float32'"
  "network.T5Config.vocab_size = 1152" "network.T5Config.emb_dim = 32" "network.T5Config.head_dim = 8"
  "network.T5Config.mlp_dim = 64" "train/utils.DatasetConfig.seed = 3" "utils.SaveCheckpointConfig.period = 8"
  "train_script.train.eval_period = 1000" "train_script.train.stats_period = 1"
  "utils.create_learning_rate_scheduler.factors = 'constant'"
  "utils.create_learning_rate_scheduler.base_learning_rate = 0.05")
args=(train --gin_file="$SRC/configs/models/t5_1_1/tiny.gin" --gin_file="$SRC/configs/runs/pretrain.gin")
for b in "${bindings[@]}"; do args+=("--gin_bindings=$b"); done
(cd "$WORK" && OMP_NUM_THREADS=2 "$P/bin/t5x" "${args[@]}") >"$WORK/train.log" 2>&1 ||
  { tail -n 20 "$WORK/train.log"; die "t5x train on the plugin's task failed"; }
losses=$(sed -n 's/.*"loss":\([^,}]*\).*"step":\([0-9]*\).*/\2 \1/p' "$WORK/model/train/metrics.jsonl")
echo "losses (step loss):" $losses
(($(wc -l <<<"$losses") == 8)) || fail "expected 8 logged losses"
# (summed over target tokens: about 1000 at step 1)
awk 'NR == 1 {a = $2} NR >= 6 {s += $2} END {exit !(s / 3 < 0.9 * a)}' <<<"$losses" ||
  fail "the mean loss of steps 6-8 is not 10% below step 1's"
((fails == 0)) && echo "plugin_out_of_tree: OK"
exit $((fails > 0))
