#!/usr/bin/env bash
# Several hosts, as users run them (issue 17, item 6): two "hosts" are network
# namespaces on this machine joined by a veth pair on a private subnet; mpirun
# runs in host 0 and starts host 1's daemon through a launch agent that enters
# its namespace (netns_launch_agent.sh, in ssh's place), over TCP only
# (btl tcp,self). `t5x train` (tiny T5.1.1) runs one process per host on mesh
# (data=2): each host feeds its rows of every global batch and saves its own
# data position (train_ds-PPP-of-002.json; docs/trainer.md, 'data'). Checks:
#   1. the losses and the final parameters are bitwise those of one process
#      with num_microbatches = 2 (docs/trainer.md);
#   2. killing every process of host 1 (SIGKILL) after a checkpoint ends the
#      job with a nonzero status within 60 s, and the log names the dead host;
#   3. the newest complete checkpoint verifies (`t5x ckpt info`) and the job
#      resumes from it across both hosts on the one-process losses.
# Needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN (`ip netns add`); without
# them it fails and says so. Traffic stays inside the two namespaces (they hold
# only lo and the veth ends; nothing is created in the caller's namespace),
# and both are deleted on exit, also on failure.
# Usage, from the source root: multihost_netns_test.sh BIN_DIR MPIEXEC
set -uo pipefail
BIN=$(cd "$1" && pwd)
MPIEXEC=$2
AGENT=$(cd "$(dirname "$0")" && pwd)/netns_launch_agent.sh
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
die() { echo "FAIL: $*"; exit 1; }
ns_exists() { ip netns list 2>/dev/null | grep -q "^$1\( \|$\)"; }
ns_delete() {
  ns_exists "$1" || return 0
  local pids
  pids=$(ip netns pids "$1")
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null # one PID a word
  ip netns del "$1"
}

# Namespaces of an earlier run killed before its trap ran (ctest's TIMEOUT).
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(t5x-mh[0-9]*-h[01]\).*/\1/p'); do
  owner=${ns#t5x-mh}
  [[ -d /proc/${owner%%-*} ]] || ns_delete "$ns"
done

NET=10.213.$(($$ % 250 + 1)) # a /24 per run (the namespaces keep runs apart anyway)
H0=t5x-mh$$-h0 H1=t5x-mh$$-h1
A0=$NET.1 A1=$NET.2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/t5x_multihost.XXXXXX")
cleanup() {
  ns_delete "$H1"
  ns_delete "$H0"
  if ((fails == 0)); then rm -rf "$WORK"; else echo "logs and model dirs kept in $WORK"; fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

if ! err=$(ip netns add "$H0" 2>&1); then
  die "'ip netns add' is not permitted here ($err): this test builds two hosts as network" \
    "namespaces and needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN (e.g. a container run with" \
    "--cap-add NET_ADMIN --cap-add SYS_ADMIN); it is not skipped"
fi
setup() {
  ip netns add "$H1" &&
    ip -n "$H0" link add veth0 type veth peer name veth1 netns "$H1" &&
    ip -n "$H0" addr add "$A0/24" dev veth0 && ip -n "$H1" addr add "$A1/24" dev veth1 &&
    ip -n "$H0" link set lo up && ip -n "$H1" link set lo up &&
    ip -n "$H0" link set veth0 up && ip -n "$H1" link set veth1 up
}
setup || die "could not set up the veth pair between $H0 and $H1"
for ns in "$H0" "$H1"; do
  links=$(ip -n "$ns" -o link | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | sort | tr '\n' ' ')
  [[ $links == "lo veth"[01]" " ]] || die "$ns holds other interfaces than lo and its veth end: $links"
done
ip -o addr | grep -q " $NET\." && die "the caller's namespace has an address on $NET.0/24"
echo "hosts: $H0 ($A0) and $H1 ($A1), joined by a veth pair"

# The tiny run of tests/t5x/trainer/test_util.h (tiny_bindings), checkpoint every 2 steps.
train_args() { # MODEL_DIR TRAIN_STEPS [BINDING...]
  local dir=$1 steps=$2
  shift 2
  printf '%s\n' train --gin_file=configs/models/t5_1_1/tiny.gin --gin_file=configs/runs/pretrain.gin
  for b in "MODEL_DIR = '$dir'" "MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'" \
    "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}" "TRAIN_STEPS = $steps" "BATCH_SIZE = 8" \
    "USE_CACHED_TASKS = False" "RANDOM_SEED = 7" "ACTIVATION_DTYPE = 'float32'" \
    "network.T5Config.vocab_size = 1152" "network.T5Config.emb_dim = 32" "network.T5Config.head_dim = 8" \
    "network.T5Config.mlp_dim = 64" "train/utils.DatasetConfig.seed = 3" "utils.SaveCheckpointConfig.period = 2" \
    "train_script.train.eval_period = 100000" "train_script.train.stats_period = 1" \
    "utils.create_learning_rate_scheduler.factors = 'constant'" \
    "utils.create_learning_rate_scheduler.base_learning_rate = 0.05" "$@"; do
    printf '%s\n' "--gin_bindings=$b"
  done
}
# mpirun in host 0, one process on each host, TCP on the test subnet only.
on_two_hosts() { # SECONDS T5X_ARG...
  local secs=$1
  shift
  T5X_NETNS_HOSTS="$A1=$H1" timeout "$secs" ip netns exec "$H0" "$MPIEXEC" --host "$A0,$A1" -np 2 \
    --bind-to none --mca btl tcp,self --mca btl_tcp_if_include "$NET.0/24" \
    --mca oob_tcp_if_include "$NET.0/24" --mca plm_rsh_agent "$AGENT" -x OMP_NUM_THREADS "$BIN/t5x" "$@"
}
# "STEP LOSS" per line of MODEL_DIR/train/metrics.jsonl, in its order.
losses() { sed -n 's/.*"loss":\([^,}]*\).*"step":\([0-9]*\).*/\2 \1/p' "$1/train/metrics.jsonl"; }
# Steps FIRST..LAST of RUN's losses are bitwise REF's.
same_losses() { # WHAT RUN REF FIRST LAST
  local got want
  got=$(losses "$2" | awk -v a="$4" -v b="$5" '$1 >= a && $1 <= b')
  want=$(losses "$3" | awk -v a="$4" -v b="$5" '$1 >= a && $1 <= b')
  if [[ $(wc -l <<<"$want") -ne $(($5 - $4 + 1)) || $got != "$want" ]]; then
    fail "$1: losses of steps $4..$5 differ from one process's"
    diff <(echo "$want") <(echo "$got")
  fi
}
show_log() { echo "---- $1"; tail -n 40 "$1"; }

# Reference: one process, num_microbatches = 2.
REF_STEPS=10
mapfile -t args < <(train_args "$WORK/ref" $REF_STEPS "trainer.Trainer.num_microbatches = 2")
timeout 60 "$BIN/t5x" "${args[@]}" >"$WORK/ref.log" 2>&1 || { show_log "$WORK/ref.log"; die "the one-process run failed"; }

# 1. Two hosts: bitwise the one-process run.
mapfile -t args < <(train_args "$WORK/hosts" 8)
f0=$fails
if on_two_hosts 90 "${args[@]}" >"$WORK/hosts.log" 2>&1; then
  same_losses "two hosts" "$WORK/hosts" "$WORK/ref" 1 8
  grep -q "batch split over 'data' (2 x 4 rows)" "$WORK/hosts.log" || fail "no (data=2) split in the log"
  [[ -f $WORK/hosts/checkpoint_8/train_ds-001-of-002.json ]] || fail "no data position of host 1 in checkpoint_8"
  digest() { "$BIN/t5x" ckpt info "$1" --digest_only | grep -E '^(target|state/param_states)/'; }
  d_ref=$(digest "$WORK/ref/checkpoint_8") d_hosts=$(digest "$WORK/hosts/checkpoint_8")
  (($(wc -l <<<"$d_ref") > 20)) || fail "too few arrays in the reference checkpoint"
  [[ $d_ref == "$d_hosts" ]] || fail "two hosts: checkpoint_8 arrays differ from one process's"
  ((fails == f0)) && echo "two hosts: losses of steps 1-8 and $(wc -l <<<"$d_ref") checkpoint arrays bitwise one process's"
else
  show_log "$WORK/hosts.log"
  fail "the two-host run failed"
fi

# 2. Host 1 dies after checkpoint_4: every process in its namespace is SIGKILLed.
DIR=$WORK/dies
mapfile -t args < <(train_args "$DIR" 100000)
on_two_hosts 90 "${args[@]}" >"$WORK/dies.log" 2>&1 &
job=$!
for ((i = 0; i < 600; i++)); do
  [[ -d $DIR/checkpoint_4 ]] && break
  sleep 0.1
done
victims=$(ip netns pids "$H1" | tr '\n' ' ')
t5x_on_h1=0
for p in $victims; do [[ $(cat /proc/$p/comm 2>/dev/null) == t5x ]] && t5x_on_h1=$((t5x_on_h1 + 1)); done
if [[ -d $DIR/checkpoint_4 && -n $victims ]]; then
  kill -9 $victims
  t0=$(date +%s%N)
  wait $job
  rc=$?
  secs=$(awk -v ns=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }')
  echo "host 1 killed (PIDs $victims, $t5x_on_h1 of them t5x): the job ended after $secs s with status $rc"
  ((t5x_on_h1 == 1)) || fail "host 1 ran $t5x_on_h1 t5x processes, not 1"
  ((rc != 0 && rc != 124)) || fail "the job's status is $rc after host 1 died"
  awk -v s="$secs" 'BEGIN { exit !(s < 60) }' || fail "the job took $secs s to end after host 1 died"
  # Open MPI names the host when its daemon's connection drops first; when the
  # launch agent's exit is seen first, the agent names it (as ssh would).
  grep -e "$A1\( \|\$\)" "$WORK/dies.log" || { show_log "$WORK/dies.log"; fail "no message names the dead host $A1"; }
else
  kill -9 $job 2>/dev/null
  wait $job
  fail "no checkpoint_4 within 60 s, or no process in $H1"
fi

# 3. The newest complete checkpoint verifies and the job resumes from it.
last=$(ls -d "$DIR"/checkpoint_* 2>/dev/null | sed -n 's/.*checkpoint_\([0-9]*\)$/\1/p' | sort -n | tail -1)
if [[ -z $last ]] || ((last < 4 || last > REF_STEPS - 2)); then
  fail "newest checkpoint '${last}' of the killed run: want 4..$((REF_STEPS - 2))"
else
  "$BIN/t5x" ckpt info "$DIR/checkpoint_$last" >"$WORK/info.log" 2>&1 ||
    { show_log "$WORK/info.log"; fail "ckpt info rejects checkpoint_$last"; }
  grep -q "verified: .* match" "$WORK/info.log" || fail "ckpt info did not verify checkpoint_$last"
  "$BIN/t5x" ckpt info "$DIR" >"$WORK/info_dir.log" 2>&1
  grep -q "^checkpoint $DIR/checkpoint_$last\$" "$WORK/info_dir.log" ||
    { show_log "$WORK/info_dir.log"; fail "ckpt info MODEL_DIR does not show checkpoint_$last as newest"; }
  f0=$fails
  same_losses "killed run" "$DIR" "$WORK/ref" 1 "$last"
  mapfile -t args < <(train_args "$DIR" $((last + 2)))
  if on_two_hosts 90 "${args[@]}" >"$WORK/resume.log" 2>&1; then
    grep -q "resumed from $DIR/checkpoint_$last" "$WORK/resume.log" || fail "did not resume from checkpoint_$last"
    # metrics.jsonl keeps the killed run's lines: the resumed steps are its last two.
    tail -n 2 <(losses "$DIR") >"$WORK/resumed"
    [[ $(cut -d' ' -f1 "$WORK/resumed" | tr '\n' ' ') == "$((last + 1)) $((last + 2)) " ]] ||
      fail "resumed steps: $(cat "$WORK/resumed")"
    while read -r line; do
      grep -qxF "$line" <(losses "$WORK/ref") || fail "resumed step $line: not one process's loss"
    done <"$WORK/resumed"
    ((fails == f0)) && echo "checkpoint_$last verified; resumed on two hosts, steps $((last + 1))-$((last + 2)) bitwise one process's"
  else
    show_log "$WORK/resume.log"
    fail "resuming on two hosts failed"
  fi
fi

if ((fails > 0)); then
  echo "$fails check(s) failed"
  exit 1
fi
echo PASS
