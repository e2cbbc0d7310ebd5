#!/usr/bin/env bash
# End-to-end test of examples/slurm/ on a real Slurm: a one-node cluster
# (munged, slurmctld and slurmd started here, on 127.0.0.1, configured for
# a container: no systemd, no cgroup plugins, all state in a temporary
# folder), the example scripts submitted with sbatch, and the faults a
# cluster brings.
#
#   tests/slurm/e2e.sh [HERDSIM]     # default: target/release/herdsim
#
# Needs root (slurmd starts each job as its user) and Debian's packages
# slurmctld, slurmd, slurm-client and munge (.ci/run installs them). Checks:
#  1. examples/slurm/sweep.sbatch as an array of 8 tasks (`--shard auto`,
#     `--jobs` from --cpus-per-task) and merge.sbatch after it
#     (--dependency=afterok), waited for with `sbatch --wait`: the merged
#     CSVs are byte-identical to one unsharded `herdsim run`, and the
#     figure is drawn.
#  2. One array task killed (`scancel JOB_3`): the merge job never starts
#     (DependencyNeverSatisfied); `herdsim merge` refuses the unfinished
#     shard and a missing one, naming it; the task re-run on its own
#     (SHARDS=8 sbatch --array=3) continues from its journal.
#  3. A task re-run with a different herdsim binary (another build): the
#     merge job fails, naming the shard's build; re-run with the right
#     binary, the merge gives the single run's bytes again.
# Whatever happens, the jobs are cancelled and the three daemons stopped
# by their process ids (a trap on EXIT, INT, TERM and HUP). On failure, or
# with KEEP=1, the temporary folder (logs, results) is kept and named.
# `A && B || die`: die when either check fails, as meant.
# shellcheck disable=SC2015
set -euo pipefail

started=$(date +%s)
repo=$(cd "$(dirname "$0")/../.." && pwd)
die() {
    echo "slurm e2e: FAILED: $*" >&2
    exit 1
}
step() { echo "== slurm e2e ($(($(date +%s) - started)) s): $*"; }

herdsim=${1:-$repo/target/release/herdsim}
[ -x "$herdsim" ] || die "no herdsim binary at $herdsim (cargo build --release, or give its path)"
herdsim=$(cd "$(dirname "$herdsim")" && pwd)/$(basename "$herdsim")
[ "$(id -u)" = 0 ] || die "needs root: slurmd starts jobs as their user (run it with sudo)"
for c in munged slurmctld slurmd sbatch squeue scancel scontrol sinfo perl; do
    command -v "$c" >/dev/null ||
        die "$c not found: apt-get install slurmctld slurmd slurm-client munge"
done

# The test's own cluster only, whatever this shell runs in.
for v in ${!SLURM_@} ${!SBATCH_@} ${!SQUEUE_@} ${!SALLOC_@}; do unset "$v"; done
unset JOB_COMPLETION_INDEX HERDSIM SCENARIO OUT RESULTS SHARDS
keep=${KEEP:-0}

work=$(mktemp -d /tmp/herdsim-slurm.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/etc" "$work/state" "$work/spool" "$work/log" "$work/run"
export SLURM_CONF=$work/etc/slurm.conf
pids=() # the daemons, in the order they started
names=()

# Whether process $1 (a child of this shell) is still running (not a zombie).
alive() {
    local state
    state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ]
}

# Stop daemon $1 (pid) named $2: SIGTERM, up to 15 s, then SIGKILL.
stop() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        echo "slurm e2e: $2 (pid $pid) ignored SIGTERM for 15 s: SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local status=$? i
    trap - EXIT INT TERM HUP
    set +e
    # Jobs first (slurmd's job steps outlive slurmd), while Slurm runs.
    if [ ${#pids[@]} -ge 2 ] && alive "${pids[1]}"; then
        local jobs
        jobs=$(squeue -h -o %A 2>/dev/null | sort -u)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null
            for ((i = 0; i < 150; i++)); do
                [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
                sleep 0.1
            done
        fi
    fi
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        stop "${pids[i]}" "${names[i]}"
    done
    if [ "$status" -ne 0 ]; then
        for f in "$work"/log/*; do
            [ -f "$f" ] || continue
            echo "---- ${f#"$work"/} (last lines)" >&2
            tail -n 15 "$f" >&2
        done
        echo "slurm e2e: kept $work (logs in log/)" >&2
    elif [ "$keep" = 1 ]; then
        echo "slurm e2e: kept $work (KEEP=1)"
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Start daemon $1 (a name for messages) as "${@:2}" in the background.
start() {
    local name=$1
    shift
    "$@" >"$work/log/$name.out" 2>&1 &
    pids+=($!)
    names+=("$name")
}

# Wait until "${@:3}" succeeds, at most $1 seconds ($2 says for what); every
# daemon must stay up meanwhile.
wait_for() {
    local limit=$1 what=$2 deadline i
    shift 2
    deadline=$(($(date +%s) + limit))
    until "$@"; do
        for i in "${!pids[@]}"; do
            alive "${pids[i]}" || die "${names[i]} exited (see log/${names[i]}.out)"
        done
        [ "$(date +%s)" -lt "$deadline" ] || die "no $what after $limit s"
        sleep 0.1
    done
}

# A TCP port nobody listens on.
free_port() {
    local p i
    for ((i = 0; i < 100; i++)); do
        p=$((20000 + RANDOM % 20000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    die "no free TCP port found"
}

step "munge, slurmctld and slurmd on 127.0.0.1 ($(slurmctld -V), $(munged -V 2>&1 | head -1 | cut -d' ' -f1))"
mkdir -m 700 "$work/munge"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
start munged munged -F --key-file="$work/munge/munge.key" \
    --socket="$work/run/munge.socket" --pid-file="$work/run/munged.pid" \
    --seed-file="$work/munge/munged.seed" --log-file="$work/log/munged.log"
wait_for 10 "munge socket" test -S "$work/run/munge.socket"

host=$(hostname -s)
ctld_port=$(free_port)
slurmd_port=$(free_port)
[ "$ctld_port" != "$slurmd_port" ] || slurmd_port=$((ctld_port + 1))
cat >"$SLURM_CONF" <<EOF
# A one-node Slurm for a container: no systemd, no cgroups, root daemons,
# state and logs under $work.
ClusterName=herdsim
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/run/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/run/slurmctld.pid
SlurmdPidFile=$work/run/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
# No cgroup plugin anywhere: processes tracked through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobContainerType=job_container/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
KillWait=5
# 16 CPUs declared whatever the machine has, so that all 8 tasks of 2 CPUs
# run at once.
SlurmdParameters=config_overrides
NodeName=herdsim-node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=16 RealMemory=4096 State=UNKNOWN
PartitionName=test Nodes=herdsim-node Default=YES MaxTime=INFINITE State=UP
EOF
start slurmctld slurmctld -D -f "$SLURM_CONF"
start slurmd slurmd -D -f "$SLURM_CONF" -N herdsim-node
node_idle() { [ "$(sinfo -h -n herdsim-node -o %t 2>/dev/null)" = idle ]; }
wait_for 30 "idle node in sinfo" node_idle

cd "$repo"
scenario=scenarios/pile-on.toml
name=pile-on
# 8 points x 2 policies x 40 replications of 1000 questions: a few seconds
# of work per task, so that one can be killed while it runs.
args=(--reps 40 --set workload.count=1000)
array=(--cpus-per-task=2 --output="$work/log/%x-%A_%a.out")
export HERDSIM=$herdsim SCENARIO=$scenario
build=$("$herdsim" --version | sed -n 's/.*(build \([0-9a-f]*\))$/\1/p')
[ ${#build} = 16 ] || die "cannot read the build from \`$herdsim --version\`"

step "the reference: one unsharded run of $scenario ${args[*]}"
"$herdsim" run "$scenario" "${args[@]}" --quiet --no-plot --out "$work/ref" >/dev/null
ref=$work/ref/$name

# Check that $1 holds the reference's CSVs, byte for byte, and a figure.
same_as_reference() {
    local f
    for f in summary.csv runs.csv; do
        cmp "$ref/$f" "$1/$f" || die "$1/$f differs from the unsharded run's"
    done
    [ "$(head -c 8 "$1/comparison.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
        die "$1/comparison.png is not a PNG"
    [ "$(wc -c <"$1/comparison.png")" -gt 20000 ] || die "$1/comparison.png is nearly empty"
}

# Exit status of finished job $1 (an array task: JOB_K).
job_state() { scontrol show job "$1" | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2; }
gone() { [ -z "$(squeue -h -j "$1" -o %i 2>/dev/null)" ]; }

step "1. 8 array tasks (sweep.sbatch), then the merge job (afterok), with sbatch --wait"
export OUT=$work/a/shards RESULTS=$work/a/results
jobid=$(sbatch --parsable "${array[@]}" examples/slurm/sweep.sbatch "${args[@]}")
sbatch --wait --quiet --dependency=afterok:"$jobid" --output="$work/log/merge-a.out" \
    examples/slurm/merge.sbatch >/dev/null || die "the merge job failed (log/merge-a.out)"
for k in 0 1 2 3 4 5 6 7; do
    grep -q "^shard = $k\$" "$OUT/$k/$name/shard.toml" &&
        grep -q '^shards = 8$' "$OUT/$k/$name/shard.toml" ||
        die "$OUT/$k/$name/shard.toml is not shard $k/8"
    log=$work/log/herdsim-sweep-${jobid}_$k.out
    grep -qF "herdsim: shard $k/8 (SLURM_ARRAY_TASK_ID=$k, array 0-7, 8 tasks)" "$log" ||
        die "task $k did not say its shard (log/${log##*/})"
    grep -q " on 2 threads); wrote " "$log" || die "task $k did not run on 2 threads (--jobs)"
done
grep -q "merged 8 shards of \`$name\`" "$work/log/merge-a.out" || die "no merge note"
same_as_reference "$RESULTS/$name"
echo "   8 shards merged: summary.csv, runs.csv byte-identical to the unsharded run; comparison.png drawn"

step "2. one task killed with scancel while it runs"
export OUT=$work/b/shards RESULTS=$work/b/results
jobid=$(sbatch --parsable "${array[@]}" examples/slurm/sweep.sbatch "${args[@]}")
merge=$(sbatch --parsable --dependency=afterok:"$jobid" --output="$work/log/merge-b.out" \
    examples/slurm/merge.sbatch)
journal=$OUT/3/$name/runs.journal
saved() { [ -f "$journal" ] && grep -qv '^#' "$journal"; }
wait_for 60 "replication saved by task 3" saved
scancel "${jobid}_3"
wait_for 60 "end of the array" gone "$jobid"
[ "$(job_state "${jobid}_3")" = CANCELLED ] || die "task 3 is $(job_state "${jobid}_3"), not CANCELLED"
[ -f "$journal" ] && [ ! -e "$OUT/3/$name/shard.toml" ] || die "task 3 left no journal, or a shard.toml"
never() { [ "$(squeue -h -j "$merge" -o %r)" = DependencyNeverSatisfied ]; }
wait_for 30 "DependencyNeverSatisfied on the merge job" never
scancel "$merge"
echo "   task 3 CANCELLED with $(grep -cv '^#' "$journal") replications in its journal; the merge job never started"

set +e
"$herdsim" merge "$OUT"/*/ --quiet --out "$work/b/manual" 2>"$work/log/refused.err"
status=$?
set -e
[ $status = 2 ] || die "merge with shard 3 unfinished: exit $status, not 2"
grep -qF "$OUT/3/$name: no shard.toml: shard 3/8 has not finished" "$work/log/refused.err" ||
    die "merge did not name the unfinished shard: $(cat "$work/log/refused.err")"
set +e
"$herdsim" merge "$OUT"/[0124567]/ --quiet --out "$work/b/manual" 2>"$work/log/refused.err"
status=$?
set -e
[ $status = 2 ] || die "merge without shard 3: exit $status, not 2"
grep -qF "shard 3/8 of \`$name\` is missing" "$work/log/refused.err" ||
    die "merge did not name the missing shard: $(cat "$work/log/refused.err")"
[ ! -e "$work/b/manual" ] || die "a refused merge wrote $work/b/manual"
echo "   merge refused the unfinished shard 3/8 and, left out, the missing one (exit 2)"

step "   task 3 re-run alone: plain --shard auto refuses the subset; SHARDS=8 runs it"
set +e
rerun=$(sbatch --parsable --wait "${array[@]}" --array=3 examples/slurm/sweep.sbatch "${args[@]}")
status=$?
set -e
[ $status = 2 ] || die "--shard auto on --array=3: exit $status, not 2"
grep -qF "the Slurm array (array 3-3, 1 task) is not 0-(N-1)" "$work/log/herdsim-sweep-${rerun}_3.out" ||
    die "no clear refusal of --shard auto on --array=3 (log/herdsim-sweep-${rerun}_3.out)"
rerun=$(SHARDS=8 sbatch --parsable --wait "${array[@]}" --array=3 examples/slurm/sweep.sbatch "${args[@]}") ||
    die "the re-run of task 3 failed"
grep -q "resumed from the journal" "$work/log/herdsim-sweep-${rerun}_3.out" ||
    die "the re-run of task 3 did not resume from its journal"
[ -f "$OUT/3/$name/shard.toml" ] && [ ! -e "$journal" ] || die "task 3 did not finish"
echo "   $(grep -o '[0-9]* runs (+[0-9]* resumed from the journal)' "$work/log/herdsim-sweep-${rerun}_3.out")"

step "3. task 5 re-run by a different herdsim binary (another build)"
fake=$(printf %s "$build" | tr 0-9a-f 1-9a-f0)
other=$work/herdsim-other
perl -pe "s/$build/$fake/g" "$herdsim" >"$other"
chmod +x "$other"
"$other" --version | grep -qF "(build $fake)" || die "the other binary does not say build $fake"
rerun=$(HERDSIM=$other SHARDS=8 sbatch --parsable --wait "${array[@]}" --array=5 \
    examples/slurm/sweep.sbatch "${args[@]}") || die "the re-run of task 5 failed"
grep -q "^build = \"$fake\"$" "$OUT/5/$name/shard.toml" || die "shard 5 does not record build $fake"
merge=$(sbatch --parsable --wait --output="$work/log/merge-b1.out" examples/slurm/merge.sbatch) &&
    die "the merge job took shard 5 of another build"
grep -qF "$OUT/5/$name/shard.toml" "$work/log/merge-b1.out" &&
    grep -qF "key \`build\`: the shard was computed by another build of herdsim (build $fake, this is build $build)" \
        "$work/log/merge-b1.out" || die "the merge did not name the foreign build (log/merge-b1.out)"
[ "$(job_state "$merge")" = FAILED ] || die "the merge job is $(job_state "$merge"), not FAILED"
# shellcheck disable=SC2016
echo "   the merge job FAILED: $(grep -o 'shard.toml:[0-9:]* key `build`' "$work/log/merge-b1.out")"

step "   task 5 re-run with this herdsim, then the merge job (afterok)"
rerun=$(SHARDS=8 sbatch --parsable "${array[@]}" --array=5 examples/slurm/sweep.sbatch "${args[@]}")
sbatch --wait --quiet --dependency=afterok:"$rerun" --output="$work/log/merge-b2.out" \
    examples/slurm/merge.sbatch >/dev/null || die "the final merge job failed (log/merge-b2.out)"
same_as_reference "$RESULTS/$name"
echo "   merged: byte-identical to the unsharded run; comparison.png drawn"

step "ok in $(($(date +%s) - started)) s"
