#!/usr/bin/env bash
# scripts/bench-mold.sh — what --mold on saves: a plugin whose mold hook builds a large read-only
# table (tests/fixtures/mold_plugin.cpp, FCGI_TEST_MOLD_MIB MiB), served by W workers with the
# mold off (each worker builds its own table) and on (the mold builds it once; the workers share
# its pages copy-on-write), side by side in one run. Run `scripts/bench-mold.sh --help`.
#
# Absolute figures on a shared 2-core machine are noise: compare the two modes within one run.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$REPO/scripts/bench/lib.sh"

usage() {
  cat <<'EOF'
Usage: scripts/bench-mold.sh [OPTIONS]

For --mold off, then on (the order swapped on every pass), one fcgi-host serving the mold
fixture plugin: start W workers, wait until all are ready, read the PSS of every host
process (the master, the workers and the mold) from /proc/PID/smaps_rollup; then
`fcgi-host scale` to S workers and time it until all S are ready (the status socket's
"idle processes"). Prints a Markdown table: PSS at W workers, as a multiple of the table,
and the time to scale, the mold's as a share of the time without it.

Options:
  --table-mib N   the table the mold hook builds (default 128)
  --workers W     workers at start (default 8)
  --scale-to S    workers after the scale-up (default 32)
  --passes N      passes of both modes; the median is shown (default 3)
  --build-dir DIR a Release build (default build-bench: configured and built if missing)
  --keep-tmp      keep the temp dir (logs)
EOF
}

TABLE_MIB=128
WORKERS=8
SCALE_TO=32
PASSES=3
BUILD_DIR="$REPO/build-bench"
KEEP_TMP=0
SMOKE=0
REBUILD=1 # the build is incremental: the figures are always of the code in the tree
while [[ $# -gt 0 ]]; do
  case $1 in
    --table-mib) need_arg "$@"; TABLE_MIB=$2; shift 2 ;;
    --workers) need_arg "$@"; WORKERS=$2; shift 2 ;;
    --scale-to) need_arg "$@"; SCALE_TO=$2; shift 2 ;;
    --passes) need_arg "$@"; PASSES=$2; shift 2 ;;
    --build-dir) need_arg "$@"; BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --keep-tmp) KEEP_TMP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
positive_ints --table-mib "$TABLE_MIB"
positive_ints --workers "$WORKERS"
positive_ints --scale-to "$SCALE_TO"
positive_ints --passes "$PASSES"
((SCALE_TO > WORKERS)) || die "--scale-to must be above --workers"
for tool in cmake c++; do have "$tool" || die "missing $tool (Debian: cmake g++)"; done

T=$(mktemp -d /tmp/fcgi-mold.XXXXXX)
chmod 0755 "$T" # the workers' user (nobody, when run as root) reads the plugin here
mkdir -p "$T"/{bin,log,run}
PIDS=()
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_host
c++ -std=c++20 -O2 -fPIC -shared -I"$REPO" -o "$T/bin/libmold.so" "$REPO/tests/fixtures/mold_plugin.cpp" ||
  die "compiling the mold fixture plugin failed"
chmod 0644 "$T/bin/libmold.so"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# status_number FIELD: the field of the master's JSON status page ("" when it does not answer).
status_number() {
  "$HOST_BIN" status --connect "unix:$T/run/status.sock" --json 2>/dev/null |
    sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}

# wait_idle N: bounded (120 s): N workers ready (idle) by the status page.
wait_idle() {
  local i
  for ((i = 0; i < 12000; i++)); do
    [[ $(status_number "idle processes") == "$1" ]] && return 0
    sleep 0.01
  done
  return 1
}

pss_of_tree_kib() { # the master and its children (workers and mold)
  local p sum=0 r
  for p in "$1" $(children_of "$1"); do
    r=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    sum=$((sum + ${r:-0}))
  done
  echo "$sum"
}

# one_pass MODE: prints "PSS_KIB SCALE_MS".
one_pass() {
  local mode=$1 pid pss t0 t1
  rm -f "$T/run/"*
  "$HOST_BIN" --app "$T/bin/libmold.so" --mold "$mode" --workers "$WORKERS" \
    --listen "unix:$T/run/host.sock" --status-listen "unix:$T/run/status.sock" \
    --env "FCGI_TEST_MOLD_MIB=$TABLE_MIB" --graceful-timeout 5 >>"$T/log/host-$mode.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_listening "unix:$T/run/status.sock" || die "the host did not start (log: $T/log/host-$mode.log)"
  wait_idle "$WORKERS" || die "$WORKERS workers never became ready ($mode)"
  pss=$(pss_of_tree_kib "$pid")
  t0=$(now_ms)
  "$HOST_BIN" scale "$SCALE_TO" --connect "unix:$T/run/status.sock" >/dev/null
  wait_idle "$SCALE_TO" || die "$SCALE_TO workers never became ready ($mode)"
  t1=$(now_ms)
  stop_pids 100 "$pid" || true
  echo "$pss $((t1 - t0))"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -A PSS SCALE
for ((pass = 1; pass <= PASSES; pass++)); do
  order="off on"
  ((pass % 2 == 0)) && order="on off"
  for mode in $order; do
    one_pass "$mode" >"$T/log/pass" # not in a subshell: PIDS and die() stay this shell's
    read -r pss ms <"$T/log/pass"
    note "pass $pass, --mold $mode: PSS ${pss} kB at $WORKERS workers; $WORKERS -> $SCALE_TO in ${ms} ms"
    PSS[$mode]+="$pss "
    SCALE[$mode]+="$ms "
  done
done

table_kib=$((TABLE_MIB * 1024))
echo "| --mold | PSS of all processes, $WORKERS workers | × the $TABLE_MIB MiB table | scale $WORKERS → $SCALE_TO |"
echo "|---|---|---|---|"
off_ms=$(tr ' ' '\n' <<<"${SCALE[off]}" | grep . | median)
for mode in off on; do
  p=$(tr ' ' '\n' <<<"${PSS[$mode]}" | grep . | median)
  s=$(tr ' ' '\n' <<<"${SCALE[$mode]}" | grep . | median)
  awk -v m="$mode" -v p="$p" -v t="$table_kib" -v s="$s" -v o="$off_ms" 'BEGIN {
    printf "| %s | %.0f MiB | %.2f× | %d ms (%.2f× off) |\n", m, p / 1024, p / t, s, s / o }'
done
echo
echo "Medians of $PASSES passes (order swapped each pass); $(nproc) cores; host load at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
