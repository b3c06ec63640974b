#!/usr/bin/env bash
# A throwaway one-node Slurm cluster for the Slurm tests, sourced by .ci/run (which defines
# `die` and `free_port`).
#
# `start_slurm` installs Debian's `slurm-wlm` and `munge` if their daemons are missing (apt-get,
# as root only), then starts, in a fresh `mktemp -d` directory: munged with a fresh key and its
# own socket, slurmctld and slurmd (node `localhost`, 2 CPUs, partition `ci`) from a generated
# slurm.conf that names loopback only (`CommunicationParameters=NoCtldInAddrAny,NoInAddrAny`: the
# daemons bind 127.0.0.1, not every interface). No cgroups, no accounting database: process tracking by
# /proc (`proctrack/linuxproc`), `task/none`. It waits for the node to be idle and runs one job
# through it, then exports PANDORA_TEST_SLURM=<path of slurm.conf> (the Slurm tests are ignored
# without it, see crates/pandora-cli/build.rs) and SLURM_CONF (for sbatch, squeue, scancel).
# `stop_slurm` cancels the jobs, stops the daemons and removes the directory.
#
# The daemons run as root (slurmd must, to start jobs as their user), so the cluster is started
# only as root; otherwise the Slurm tests are skipped with a warning. PANDORA_CI_SLURM=0 skips it
# on purpose; a PANDORA_TEST_SLURM already set is used as it is (by .ci/run).
#
# Run on its own, `.ci/slurm.sh COMMAND...` (as root) starts the cluster, runs COMMAND in it (e.g.
# `cargo test -p pandora-cli --test slurm`) and stops it.

SLURM_DIR=""
SLURM_PIDS=()

# Whether the daemons and clients the cluster needs are installed.
slurm_installed() {
    local b
    for b in munged slurmctld slurmd sbatch squeue scancel sinfo scontrol; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || return 1
    done
}

# The path of an installed program (sbin is not on every PATH).
slurm_bin() {
    command -v "$1" 2>/dev/null || echo "/usr/sbin/$1"
}

# Prints a daemon's log and dies with a message naming it.
slurm_die() {
    local log
    for log in "$SLURM_DIR"/*.log; do
        [ -s "$log" ] || continue
        echo "---- $log (last 30 lines)" >&2
        tail -n 30 "$log" >&2
    done
    die "Slurm: $* (logs above; set PANDORA_CI_SLURM=0 to run the CI without the Slurm tests)"
}

# Waits up to $2 seconds for command $1 (a string for eval) to succeed.
slurm_wait() {
    local i
    for i in $(seq 1 $(($2 * 5))); do
        if eval "$1" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.2
    done
    return 1
}

slurm_install() {
    echo ".ci/run: installing Slurm and MUNGE from Debian packages (slurm-wlm, munge)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2 || die "apt-get update failed"
    apt-get install -y -q --no-install-recommends slurm-wlm munge >&2 \
        || die "apt-get install slurm-wlm munge failed"
    slurm_installed || die "slurm-wlm and munge installed but a daemon or client is missing"
}

# munged with a fresh 1024-byte key and its own socket, as root.
slurm_start_munge() {
    mkdir -m 700 "$SLURM_DIR/munge"
    head -c 1024 /dev/urandom >"$SLURM_DIR/munge/key"
    chmod 400 "$SLURM_DIR/munge/key"
    "$(slurm_bin munged)" --force --key-file="$SLURM_DIR/munge/key" \
        --socket="$SLURM_DIR/munge/socket" --pid-file="$SLURM_DIR/munge/pid" \
        --seed-file="$SLURM_DIR/munge/seed" --log-file="$SLURM_DIR/munged.log" \
        || slurm_die "munged did not start"
    SLURM_PIDS+=("$(cat "$SLURM_DIR/munge/pid")")
    slurm_wait "[ -S '$SLURM_DIR/munge/socket' ]" 10 || slurm_die "munged opened no socket"
}

# The configuration of the cluster: one node, `localhost`, on 127.0.0.1.
slurm_conf() {
    local ctl_port=$1 d_port=$2 mem
    mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
    cat <<EOF
# Written by .ci/slurm.sh for the Slurm tests: one node on loopback.
ClusterName=pandora-ci
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctl_port
SlurmdPort=$d_port
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge/socket
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=3600
InactiveLimit=0
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=2 RealMemory=$mem State=UNKNOWN
PartitionName=ci Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

start_slurm() {
    if [ "${PANDORA_CI_SLURM:-1}" = 0 ]; then
        echo ".ci/run: PANDORA_CI_SLURM=0: no Slurm cluster; the Slurm tests are ignored" >&2
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo ".ci/run: WARNING: not root, so no Slurm cluster (slurmd must run as root): the" \
            "Slurm tests are ignored" >&2
        return 0
    fi
    slurm_installed || slurm_install
    SLURM_DIR=$(mktemp -d /tmp/pandora-ci-slurm.XXXXXX)
    chmod 700 "$SLURM_DIR"
    mkdir "$SLURM_DIR/state" "$SLURM_DIR/spool"
    slurm_start_munge

    local ctl_port d_port
    ctl_port=$(free_port) || die "no free TCP port found on 127.0.0.1"
    d_port=$(free_port) || die "no free TCP port found on 127.0.0.1"
    [ "$d_port" != "$ctl_port" ] || d_port=$(free_port) || die "no free TCP port found"
    slurm_conf "$ctl_port" "$d_port" >"$SLURM_DIR/slurm.conf"
    export SLURM_CONF="$SLURM_DIR/slurm.conf"

    "$(slurm_bin slurmctld)" -f "$SLURM_CONF" -i >>"$SLURM_DIR/slurmctld.log" 2>&1 \
        || slurm_die "slurmctld did not start"
    slurm_wait "[ -s '$SLURM_DIR/slurmctld.pid' ]" 20 || slurm_die "slurmctld wrote no pid file"
    SLURM_PIDS+=("$(cat "$SLURM_DIR/slurmctld.pid")")
    "$(slurm_bin slurmd)" -f "$SLURM_CONF" -N localhost >>"$SLURM_DIR/slurmd.log" 2>&1 \
        || slurm_die "slurmd did not start"
    slurm_wait "[ -s '$SLURM_DIR/slurmd.pid' ]" 20 || slurm_die "slurmd wrote no pid file"
    SLURM_PIDS+=("$(cat "$SLURM_DIR/slurmd.pid")")

    slurm_wait "sinfo -h -n localhost -o %T | grep -qx idle" 60 \
        || slurm_die "the node did not become idle within 60 s: $(sinfo -h -o '%T %E' 2>&1)"
    # One job through the whole path (munge credentials, slurmd, the batch step).
    local job state
    job=$(sbatch --parsable --output=/dev/null --wrap true 2>&1) \
        || slurm_die "sbatch refused a test job: $job"
    slurm_wait "[ -z \"\$(squeue -h -j $job 2>/dev/null)\" ]" 60 \
        || slurm_die "a test job did not finish within 60 s: $(squeue -j "$job" 2>&1)"
    state=$(scontrol -o show job "$job" 2>&1 | grep -o 'JobState=[A-Z_]*' || true)
    [ "$state" = JobState=COMPLETED ] || slurm_die "a test job ended with ${state:-no state}"
    export PANDORA_TEST_SLURM="$SLURM_CONF"
    echo ".ci/run: Slurm $(sinfo -V | awk '{print $2}'): one node, 2 CPUs, slurmctld on" \
        "127.0.0.1:$ctl_port (state and logs in $SLURM_DIR)" >&2
}

stop_slurm() {
    [ -n "${SLURM_DIR:-}" ] || return 0
    if [ -n "${SLURM_CONF:-}" ] && [ -f "$SLURM_CONF" ]; then
        scancel --quiet --user=root >/dev/null 2>&1 || true
        slurm_wait "[ -z \"\$(squeue -h -o %i 2>/dev/null)\" ]" 15 || true
    fi
    # All at once (each takes a second or two to exit), then SIGKILL for any left after 15 s.
    local pid
    for pid in "${SLURM_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${SLURM_PIDS[@]}"; do
        slurm_wait "! kill -0 $pid" 15 || kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$SLURM_DIR"
    SLURM_DIR=""
}

# Executed rather than sourced (`.ci/slurm.sh COMMAND...`, as root): starts the cluster, runs
# COMMAND with PANDORA_TEST_SLURM and SLURM_CONF set, and stops the cluster.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    die() {
        echo ".ci/slurm.sh: ERROR: $*" >&2
        exit 1
    }
    free_port() {
        local port i
        for i in $(seq 1 100); do
            port=$((20000 + RANDOM % 40000))
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                echo "$port"
                return 0
            fi
        done
        return 1
    }
    [ "$#" -gt 0 ] || die "usage: .ci/slurm.sh COMMAND [ARG...] (as root)"
    [ "$(id -u)" -eq 0 ] || die "the cluster's slurmd must run as root"
    trap stop_slurm EXIT
    trap 'exit 130' INT TERM
    start_slurm
    "$@"
fi
