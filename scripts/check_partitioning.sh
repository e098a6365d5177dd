#!/usr/bin/env bash
# Issue 17's partitioning check on a real task (docs/sharding.md, "Every
# partitioning mode on the Bible task"): T5.1.1 mini (translate_en_es_demo.gin,
# bible_translate_en_es, float32 activations, num_microbatches = None) trained
# by `t5x train`:
#   1. one process: the reference losses;
#   2. under `mpirun -np 4 --oversubscribe`, mesh_invariant = False, every
#      {parameter_partitioning_dims 1, 2} x {activation_partitioning_dims 1, 2}
#      on meshes (4,1), (2,2), (1,4): each step's loss against the reference
#      (1e-5 relative), the largest parameter + optimizer-state bytes of a
#      process (the trainer's startup line) as % of one process's, each
#      process's peak RSS (/usr/bin/time), and process 0's communication bytes
#      per step (train metrics) against `t5x partition --rank=0` (1%);
#   3. the bitwise guarantees of the mesh-invariant mode (the default):
#      (4,1) and (2,2) with 2-D parameters equal one process with
#      num_microbatches = |data| bit for bit;
#   4. 8 processes (--np8, on by default): (4,2) and (2,4) with 2-D parameters
#      against the report as in 2, plus the per-rank, per-collective check of
#      build/tests/t5x_partition_report_mpi_tests under mpirun -np 8.
#
# Usage: scripts/check_partitioning.sh [--steps N] [--batch B] [--out DIR] [--no-np8] [--resume]
#                                      [--only "NAME ..."]
#   defaults: 20 steps, BATCH_SIZE 8 ({'inputs': 64, 'targets': 64}).
#   --resume keeps DIR and skips the runs that finished there (a summary of
#   what ran is printed whatever stopped the rest). --only runs just the named
#   runs (e.g. "m2x2_p2a2 m1x4_p1a2 inv_m4x1 report_tests_np8"; the
#   reference always runs, ref_mb2 / ref_mb4 with inv_m2x2 / inv_m4x1).
# Exit status 1 when a check fails. Needs build/bin/t5x, mpirun, /usr/bin/time
# and the prepared data (scripts/prepare_data.sh); --np8 needs
# build/tests/t5x_partition_report_mpi_tests.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=20
BATCH=8
OUT=/tmp/t5x_check_partitioning
NP8=1
RESUME=0
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-np8) NP8=0; shift ;;
    --resume) RESUME=1; shift ;;
    --only) ONLY=" $2 "; shift 2 ;;
    *) echo "check_partitioning.sh: unknown argument '$1' (--steps N, --batch B, --out DIR, --no-np8, --resume, --only \"NAME ...\")" >&2; exit 2 ;;
  esac
done
[ -x build/bin/t5x ] || { echo "check_partitioning.sh: build/bin/t5x missing; run scripts/build.sh" >&2; exit 1; }
[ -f data/vocab/bible_spm.model ] || { echo "check_partitioning.sh: no data; run scripts/prepare_data.sh" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "check_partitioning.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
REPORT_TESTS=build/tests/t5x_partition_report_mpi_tests
[ "$NP8" = 0 ] || [ -x "$REPORT_TESTS" ] ||
  { echo "check_partitioning.sh: $REPORT_TESTS missing (TARGETS=t5x_partition_report_mpi_tests scripts/build.sh), or pass --no-np8" >&2; exit 1; }
[ "$RESUME" = 1 ] || rm -rf "$OUT"
mkdir -p "$OUT"
# shellcheck disable=SC2054  # the commas belong to --mca's value
MPIRUN=(mpirun --oversubscribe --bind-to none --mca btl self,vader)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
export OMP_NUM_THREADS=1  # one thread per process, as the one-process runs
COMMON=(--gin_file=configs/examples/bible/translate_en_es_demo.gin
        --gin.TRAIN_STEPS="$STEPS" --gin.BATCH_SIZE="$BATCH" --gin.ACTIVATION_DTYPE="'float32'"
        --gin.trainer.Trainer.num_microbatches=None --gin.train_script.train.stats_period=1
        --gin.train_script.train.train_eval_dataset_cfg=None --gin.train_script.train.infer_eval_dataset_cfg=None)
wanted() { [ -z "$ONLY" ] || [[ "$ONLY" == *" $1 "* ]]; }  # a run that --only keeps
MODE=()  # the mode bindings of a run, for its partition report
train() {  # name np [gin flags]: a run; each process's peak RSS in $OUT/name.rss.RANK
  local name=$1 np=$2 cmd=()
  shift 2
  MODE=("$@")
  [ "$np" -gt 1 ] && cmd=("${MPIRUN[@]}" -np "$np")
  # shellcheck disable=SC2016  # expanded by the bash of each rank
  cmd+=(bash -c 'exec /usr/bin/time -f %M -o "$0.rss.${OMPI_COMM_WORLD_RANK:-0}" "$@"' "$OUT/$name"
        build/bin/t5x train "${COMMON[@]}" --gin.MODEL_DIR="'$OUT/$name'" "$@")
  [ "$name" = ref ] || wanted "$name" || return 0
  if [ "$RESUME" = 1 ] && grep -q "done at step $STEPS" "$OUT/$name.log" 2>/dev/null; then return; fi
  echo "== $name ($np process(es)): $*" >&2
  rm -rf "${OUT:?}/$name"
  "${cmd[@]}" > "$OUT/$name.log" 2>&1 || { tail -20 "$OUT/$name.log" >&2; exit 1; }
}
report() {  # name data model: `t5x partition` of process 0 with the last run's mode
  wanted "$1" || return 0
  build/bin/t5x partition "${COMMON[@]}" --gin.MODEL_DIR="'$OUT/unused'" --mesh="data=$2,model=$3" --rank=0 \
    "${MODE[@]}" > "$OUT/$1.report" 2>&1 || { tail -20 "$OUT/$1.report" >&2; exit 1; }
}
rules() {  # param_dims act_dims
  echo --gin.partitioning.standard_logical_axis_rules.parameter_partitioning_dims="$1" \
       --gin.partitioning.standard_logical_axis_rules.activation_partitioning_dims="$2"
}

summary() {  # every run found in $OUT against the reference; status 1 on a failed or missing check
python3 - "$OUT" "$STEPS" "$NP8" <<'PY'
import glob, json, os, re, sys
out, steps, np8 = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
failed, missing = [], []
def metrics(name):
    d = {}
    for line in open(f"{out}/{name}/train/metrics.jsonl"):
        j = json.loads(line)
        if "loss" in j: d[j["step"]] = j
    if steps not in d: raise FileNotFoundError(f"{name} stopped before step {steps}")
    return d
def losses(name):
    return {s: j["loss"] for s, j in metrics(name).items()}
def rss(name):
    return ", ".join(f"{int(open(f).read().split()[-1]) / 1024:.0f}" for f in sorted(glob.glob(f"{out}/{name}.rss.*")))
def state_bytes(name):  # the trainer's startup line on several processes
    m = re.search(r"bytes per process: at most (\d+) of one process's (\d+)", open(f"{out}/{name}.log").read())
    return int(m.group(1)), int(m.group(2))
def report_bytes(name):
    m = re.search(r"^    total\s+(\d+) B", open(f"{out}/{name}.report").read(), re.M)
    return float(m.group(1))
def worst(got, ref):
    rel = [abs(got[s] - ref[s]) / abs(ref[s]) for s in range(1, steps + 1)]
    return max(rel), sum(got[s] == ref[s] for s in range(1, steps + 1))
def one_mesh_row(name, mesh, p, a):  # loss, bytes, RSS and communication of a mesh_invariant = False run
    w, _ = worst(losses(name), ref)
    most, whole = state_bytes(name)
    sent = metrics(name)[steps]["communication/bytes_sent_per_step"]
    want = report_bytes(name)
    comm_ok = abs(sent - want) <= 0.01 * want
    ok = w <= 1e-5 and comm_ok and (p == 1 or most / whole <= 0.27)
    if not ok: failed.append(name)
    print(f"| {mesh} | {p} | {a} | {w:.2e} | {most:,} ({100 * most / whole:.2f}%) | {rss(name)} | "
          f"{sent:,.0f} / {want:,.0f}{'' if comm_ok else ' MISMATCH'} |{'' if ok else ' FAILED'}")
ref = losses("ref")
print(f"one process: losses {ref[1]:.6f} .. {ref[steps]:.6f}; peak RSS {rss('ref')} MiB")
print(f"| mesh | param dims | act dims | max rel. loss diff ({steps} steps) | param + optimizer bytes, most of a "
      "process (% of one process) | peak RSS MiB per process | bytes sent per step, process 0: measured / report |")
print("|---|---|---|---|---|---|---|")
rows = [(f"m{4 // m}x{m}_p{p}a{a}", f"({4 // m},{m})", p, a) for m in (1, 2, 4) for p in (1, 2) for a in (1, 2)]
rows += np8 * [(f"np8_m{8 // m}x{m}_p2a1", f"({8 // m},{m}), 8 processes", 2, 1) for m in (2, 4)]
for name, mesh, p, a in rows:
    try:
        one_mesh_row(name, mesh, p, a)
    except (FileNotFoundError, AttributeError) as e:
        missing.append(name)
print("\nmesh-invariant mode (the default), 2-D parameters, against one process with |data| microbatches:")
for name, against, what in [("inv_m4x1", "ref_mb4", "(4,1) vs one process with 4 microbatches"),
                            ("inv_m2x2", "ref_mb2", "(2,2) vs one process with 2 microbatches")]:
    try:
        w, equal = worst(losses(name), losses(against))
        most, whole = state_bytes(name)
    except (FileNotFoundError, AttributeError):
        missing.append(name)
        continue
    ok = equal == steps and most / whole <= 0.27
    if not ok: failed.append(name)
    print(f"  {what}: {equal}/{steps} steps bitwise equal (worst {w:.2e}); {100 * most / whole:.2f}% of the bytes "
          f"per process; peak RSS {rss(name)} MiB{'' if ok else '  FAILED'}")
if os.path.exists(f"{out}/report_tests_np8.status"):
    status = open(f"{out}/report_tests_np8.status").read().strip()
    print(f"\nt5x_partition_report_mpi_tests under mpirun -np 8 (every rank, every collective, 1%): {status}")
    for c in re.findall(r"^\[partition\] (.*)$", open(f"{out}/report_tests_np8.log").read(), re.M):
        print(f"  {c}")
    if status != "ok": failed.append("report_tests_np8")
elif np8:
    missing.append("report_tests_np8")
if missing: print("\nnot run (or not finished): " + ", ".join(missing))
print("FAILED: " + ", ".join(failed) if failed else "no check failed")
sys.exit(1 if failed or missing else 0)
PY
}
trap 'exit 143' TERM INT
# shellcheck disable=SC2154  # status is set inside the trap
trap 'status=$?; trap - EXIT; summary || true; exit $status' EXIT
train ref 1
for model in 1 2 4; do
  for p in 1 2; do
    for a in 1 2; do
      name="m$((4 / model))x${model}_p${p}a${a}"
      # shellcheck disable=SC2046
      train "$name" 4 --gin.partitioning.PjitPartitioner.num_partitions=$model \
        --gin.partitioning.PjitPartitioner.mesh_invariant=False $(rules $p $a)
      report "$name" $((4 / model)) $model
    done
  done
done
wanted inv_m2x2 && train ref_mb2 1 --gin.trainer.Trainer.num_microbatches=2
wanted inv_m4x1 && train ref_mb4 1 --gin.trainer.Trainer.num_microbatches=4
# shellcheck disable=SC2046
train inv_m4x1 4 --gin.partitioning.PjitPartitioner.num_partitions=1 $(rules 2 1)
# shellcheck disable=SC2046
train inv_m2x2 4 --gin.partitioning.PjitPartitioner.num_partitions=2 $(rules 2 1)
if [ "$NP8" = 1 ]; then
  for model in 2 4; do
    name="np8_m$((8 / model))x${model}_p2a1"
    # shellcheck disable=SC2046
    train "$name" 8 --gin.partitioning.PjitPartitioner.num_partitions=$model \
      --gin.partitioning.PjitPartitioner.mesh_invariant=False $(rules 2 1)
    report "$name" $((8 / model)) $model
  done
  wanted report_tests_np8 || NP8=0
fi
if [ "$NP8" = 1 ]; then
  echo "== $REPORT_TESTS under mpirun -np 8" >&2
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "${MPIRUN[@]}" -np 8 "$REPORT_TESTS" \
    > "$OUT/report_tests_np8.log" 2>&1 && echo ok > "$OUT/report_tests_np8.status" ||
    echo FAILED > "$OUT/report_tests_np8.status"
fi
trap - EXIT
summary
