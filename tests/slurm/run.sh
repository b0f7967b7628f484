#!/usr/bin/env bash
# A real SLURM test: a single-node cluster on localhost, a small sweep submitted through
# `snakemake --profile workflow/profiles/slurm`, checked against sacct and a local run.
#
#   tests/slurm/run.sh [TARGET ...]      (as root, from anywhere; python with snakemake on PATH)
#
# 1. installs Debian's slurm-wlm pieces, munge, slurmdbd and mariadb-server if missing (apt-get);
# 2. starts, all inside one temporary folder and on free localhost ports: munged (own key and
#    socket), mariadbd (own datadir), slurmdbd, slurmctld, slurmd. slurmdbd is there so that
#    `sacct` works: with AccountingStorageType=accounting_storage/none, sacct only answers
#    "Slurm accounting storage is disabled", and sacct is what the executor plugin watches jobs
#    with on real clusters. No cgroups: proctrack/linuxproc, task/none, jobacct_gather/linux;
#    jobcomp/filetxt keeps a second, plain-text record of every finished job;
# 3. copies the working tree twice; runs TARGET (default: a few training runs of the smoke
#    preset, or the counting outputs if the training rules are absent) once through SLURM and
#    once locally (--cores 2);
# 4. checks: every Snakemake job is a COMPLETED SLURM job in sacct (count, state, rule names,
#    time limit and memory as the profile sets them for the rule), every result file equals
#    the local one (timing columns and logs excepted), a second build through the profile has
#    nothing to do, and provenance.json was written inside a SLURM job;
# 5. stops every daemon it started (trap on EXIT), and only those.
# Env: ATTNID_SLURM_CONFIG (default config/smoke.yaml), ATTNID_SLURM_KEEP=1 keeps the folder,
# ATTNID_SLURM_SHELL='cmd' runs cmd against the cluster instead of the sweep (debugging).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CONFIG=${ATTNID_SLURM_CONFIG:-config/smoke.yaml}
W=$(mktemp -d "${TMPDIR:-/tmp}/attnid-slurm.XXXXXX")
PIDS=()             # pid files of the daemons we started, stopped in reverse order
POLICY_CREATED=0
say() { printf '[slurm-test %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

cleanup() {
    local rc=$?
    set +e
    if [[ -n ${SLURM_CONF:-} ]] && command -v scancel >/dev/null; then scancel --user=root --quiet 2>/dev/null; fi
    local i pidfile pid
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        pidfile=${PIDS[i]}
        [[ -s $pidfile ]] || continue
        pid=$(<"$pidfile")
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    done
    ((POLICY_CREATED)) && rm -f /usr/sbin/policy-rc.d
    if ((rc != 0)); then
        say "logs of the daemons (last lines):"
        for f in "$W"/log/*.log; do [[ -f $f ]] && { echo "== $f"; tail -n 15 "$f"; }; done >&2
    fi
    if [[ ${ATTNID_SLURM_KEEP:-0} == 1 ]]; then say "kept $W"; else rm -rf "$W"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ $(id -u) == 0 ]] || fail "needs root (apt-get, daemons running as root)"
command -v snakemake >/dev/null || fail "snakemake not on PATH (activate the venv)"

# --- 1. software ------------------------------------------------------------------------------
need=()
for c in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client sacct:slurm-client slurmdbd:slurmdbd munged:munge \
    mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb:mariadb-server; do
    command -v "${c%%:*}" >/dev/null || [[ " ${need[*]} " == *" ${c#*:} "* ]] || need+=("${c#*:}")
done
if ((${#need[@]})); then
    say "apt-get install ${need[*]}"
    # Do not let the packages' init scripts start system-wide daemons: we start our own.
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && POLICY_CREATED=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "${need[@]}" >"$W/apt.log" 2>&1 ||
        { apt-get update -qq >>"$W/apt.log" 2>&1 && apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$W/apt.log" 2>&1; } ||
        { tail -20 "$W/apt.log"; fail "apt-get install failed"; }
fi
if ! python -c "import snakemake_executor_plugin_slurm" 2>/dev/null; then
    pin=$(grep -o 'snakemake-executor-plugin-slurm==[0-9.]*' "$REPO/pyproject.toml")
    say "pip install $pin"
    python -m pip install -q "$pin"
fi

# --- 2. the cluster ---------------------------------------------------------------------------
mkdir -p "$W"/{munge,db,state,spool,log,slurmlogs}
chmod 700 "$W/munge"
read -r P_CTLD P_SLURMD P_DBD P_SQL < <(python - <<'EOF'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
HOST=$(hostname -s)
NCPU=$(nproc)
MEM_MB=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 3 / 4))

say "munged"
head -c 1024 /dev/urandom >"$W/munge/munge.key"
chmod 600 "$W/munge/munge.key"
SOCK=$W/munge/munge.socket
munged --force --key-file="$W/munge/munge.key" --socket="$SOCK" --pid-file="$W/munge/munged.pid" \
    --log-file="$W/log/munged.log" --seed-file="$W/munge/seed"
PIDS+=("$W/munge/munged.pid")
munge -S "$SOCK" -n | unmunge -S "$SOCK" >/dev/null || fail "munge round trip"

say "mariadbd (accounting database for slurmdbd)"
mariadb-install-db --no-defaults --datadir="$W/db/data" --user=root --auth-root-authentication-method=normal \
    --skip-test-db >"$W/log/mariadb-install.log" 2>&1 || fail "mariadb-install-db"
mariadbd --no-defaults --datadir="$W/db/data" --user=root --socket="$W/db/sql.sock" --port="$P_SQL" \
    --bind-address=127.0.0.1 --pid-file="$W/db/mariadbd.pid" --log-error="$W/log/mariadbd.log" \
    --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 >/dev/null 2>&1 &
echo $! >"$W/db/mariadbd.launcher"
PIDS+=("$W/db/mariadbd.pid")
for _ in $(seq 100); do [[ -S $W/db/sql.sock ]] && break; sleep 0.2; done
[[ -s $W/db/mariadbd.pid ]] || echo "$(<"$W/db/mariadbd.launcher")" >"$W/db/mariadbd.pid"
mariadb --no-defaults -S "$W/db/sql.sock" -u root -e \
    "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" ||
    fail "mariadb user"

export SLURM_CONF=$W/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=attnid
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
SlurmctldPort=$P_CTLD
SlurmdPort=$P_SLURMD
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
# No cgroups: works in containers and VMs without a delegated cgroup tree.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$P_DBD
# For slurmdbd, "Pass" is the MUNGE socket to use.
AccountingStoragePass=$SOCK
# Keep the comment (the plugin writes rule_<name>_wildcards_<...>) in the accounting database.
AccountingStoreFlags=job_comment
JobCompType=jobcomp/filetxt
JobCompLoc=$W/log/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$NCPU RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
# slurmdbd reads slurmdbd.conf from the folder of SLURM_CONF; it must be private.
cat >"$W/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$P_DBD
SlurmUser=root
PidFile=$W/slurmdbd.pid
LogFile=$W/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$P_SQL
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
chmod 600 "$W/slurmdbd.conf"

say "slurmdbd, slurmctld, slurmd (ports $P_DBD, $P_CTLD, $P_SLURMD)"
slurmdbd
PIDS+=("$W/slurmdbd.pid")
for _ in $(seq 50); do sacctmgr -i add cluster attnid >/dev/null 2>&1 && break; sleep 0.2; done
sacctmgr -n -P list cluster format=cluster | grep -qx attnid || fail "slurmdbd: cluster not registered"
slurmctld
PIDS+=("$W/slurmctld.pid")
slurmd
PIDS+=("$W/slurmd.pid")
for _ in $(seq 100); do [[ $(sinfo -h -o %T 2>/dev/null) == idle ]] && break; sleep 0.2; done
[[ $(sinfo -h -o %T) == idle ]] || fail "node not idle: $(sinfo -h -o '%T %E')"
say "cluster up: $(sinfo -h -o '%P %D %c cpus %m MB %T')"
if [[ -n ${ATTNID_SLURM_SHELL:-} ]]; then # debugging: run a command against the cluster, then stop it
    say "running ATTNID_SLURM_SHELL"
    (cd "$W" && bash -c "$ATTNID_SLURM_SHELL")
    exit
fi

# --- 3. the sweep, through SLURM and locally ---------------------------------------------------
# snakemake-executor-plugin-slurm-jobstep removes every SLURM_* variable (SLURM_CONF too) before
# it calls `srun` inside the job; on a real cluster srun then finds /etc/slurm/slurm.conf or the
# configless cache of slurmd. Ours lives in $W, and /etc is left alone: a two-line srun on PATH
# puts SLURM_CONF back and runs the real srun.
mkdir -p "$W/bin"
printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$SLURM_CONF" "$(command -v srun)" >"$W/bin/srun"
chmod +x "$W/bin/srun"

copy_tree() { # the working tree as git sees it (tracked + untracked, ignored files left out)
    mkdir -p "$2"
    (cd "$1" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$2"
}
copy_tree "$REPO" "$W/slurm-run"
copy_tree "$REPO" "$W/local-run"

if (($# == 0)); then
    # A few training runs if the training rules exist, else the counting outputs.
    mapfile -t targets < <(cd "$W/local-run" && python "$REPO/tests/slurm/targets.py" "$CONFIG")
else
    targets=("$@")
fi
say "targets: ${targets[*]}"

t0=$SECONDS
(cd "$W/slurm-run" && PATH="$W/bin:$PATH" snakemake "${targets[@]}" --profile workflow/profiles/slurm --configfile "$CONFIG" \
    --slurm-init-seconds-before-status-checks 2 --max-status-checks-per-second 1 \
    --slurm-logdir "$W/slurmlogs" --slurm-keep-successful-logs --latency-wait 10 --retries 0 \
    >"$W/log/snakemake-slurm.log" 2>&1) ||
    { tail -40 "$W/log/snakemake-slurm.log"; fail "snakemake through SLURM"; }
say "SLURM run: $((SECONDS - t0)) s"
t0=$SECONDS
(cd "$W/local-run" && snakemake "${targets[@]}" --cores 2 --configfile "$CONFIG" \
    >"$W/log/snakemake-local.log" 2>&1) || { tail -40 "$W/log/snakemake-local.log"; fail "local snakemake"; }
say "local run: $((SECONDS - t0)) s"

# --- 4. checks ---------------------------------------------------------------------------------
njobs=$(grep -oE '^[0-9]+ of [0-9]+ steps \(100%\) done' "$W/log/snakemake-slurm.log" | tail -1 | cut -d' ' -f1)
[[ -n $njobs ]] || fail "no 'N of N steps (100%) done' in the SLURM run's log"
sacct -X -n -P --starttime now-1days --format=JobIDRaw,JobName,State,ExitCode,Comment,Timelimit,ReqMem >"$W/sacct.txt"
say "sacct: $(wc -l <"$W/sacct.txt") jobs"
sed 's/^/    /' "$W/sacct.txt" >&2
python "$REPO/tests/slurm/check.py" "$W/sacct.txt" "$njobs" "$W/slurm-run/results" "$W/local-run/results" \
    "$W/slurm-run/workflow/profiles/slurm/config.yaml" "$W/log/jobcomp.txt"
# The parameters the cluster jobs recorded are the ones the submitting Snakemake computes:
# a second build has nothing to do (provenance included), and the record names its SLURM job.
(cd "$W/slurm-run" && snakemake "${targets[@]}" -n --configfile "$CONFIG" 2>&1) | grep -q "Nothing to be done" ||
    fail "a second build through the profile would redo work"
RESULTS_DIR=$(python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['results_dir'])" "$W/slurm-run/$CONFIG")
python - "$W/slurm-run/$RESULTS_DIR/provenance.json" <<'EOF'
import json, sys
rec = json.load(open(sys.argv[1]))
assert rec["platform"]["slurm_job_id"], "provenance.json was not written inside a SLURM job"
EOF
say "PASS: $njobs Snakemake jobs ran as COMPLETED SLURM jobs; results equal the local run; nothing left to redo"
