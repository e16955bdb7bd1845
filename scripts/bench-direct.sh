#!/usr/bin/env bash
# scripts/bench-direct.sh — the FastCGI servers' own cost per request, with no web server in
# between: a FastCGI load generator of the project's (scripts/bench/fcgi_direct_load.c) stands
# where nginx would and drives each contender over a Unix socket.
#
# Through nginx on a small machine nginx's one worker is the bottleneck and every FastCGI host
# looks alike; here the server is what is measured. The headline is the server's CPU time per
# request (schedstat of every thread of every process of the contender), which does not depend
# on how fast the generator is; req/s and latency are beside it.
#
# Run `scripts/bench-direct.sh --help` for the options.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$REPO/scripts/bench/lib.sh"
COMMAND_LINE="scripts/bench-direct.sh${*:+ $*}"

usage() {
  cat <<'EOF'
Usage: scripts/bench-direct.sh [OPTIONS]

Drives these FastCGI servers straight over a Unix socket (no web server), with
the project's load generator (closed loop, the ~600 bytes of params nginx's
stock fastcgi_params sends, empty body):
  fcgi-host  the hello app
  libfcgi    the bare libfcgi loop (scripts/bench/bare_libfcgi.c) under spawn-fcgi
  responder  the near-free epoll responder (scripts/bench/limit_responder.c):
             the most a FastCGI server could do
  php-fpm    php-fpm 8.2 (pm=static, opcache) with an ok.php, when installed
Modes: close (a connection per request, nginx's default) and keep
(FCGI_KEEP_CONN: nginx `fastcgi_keep_conn on`). The generator runs on CPU 0,
the servers on the other CPUs (taskset).

Prints, and writes as Markdown and CSV, per W: req/s, p50/p99 and server CPU
µs per request (the headline: /proc/PID/task/*/schedstat summed over every
process of the server), and the ratios fcgi-host ÷ responder (CPU per
request) and fcgi-host ÷ libfcgi (req/s); a gnuplot chart of CPU per request.

Options:
  --passes N          passes; medians are over them (default 3)
  --duration S        seconds per run (default 3)
  --workers "LIST"    worker counts W (default "1 CORES 15")
  --conns "LIST"      connections C (default "1 16")
  --modes "LIST"      close and/or keep (default "close keep")
  --contenders "LIST" among fcgi-host libfcgi responder php-fpm (default: all)
  --host-args "ARGS"  extra arguments for fcgi-host
  --callgrind         instead of timing: instructions per request in one
                      worker of each C contender (W=1, keep, C=1), by
                      callgrind over two runs of different length (their
                      difference, so start-up does not count); needs valgrind
  --quick             1 pass of 2 s, W "1 CORES"
  --smoke             a check that the benchmark works, a few seconds:
                      fcgi-host, libfcgi and responder, W=1, 1 pass of 0.5 s,
                      both modes, C=1 and 4; no chart; any build type
  --out FILE          also write the Markdown report to FILE (default with
                      --out: CSV and chart next to it)
  --csv FILE          the per-cell CSV
  --chart FILE        PNG chart via gnuplot; --no-chart to skip it
  --build-dir DIR     CMake build directory of fcgi-host (default: build/)
  --rebuild           bring fcgi-host up to date even if the binary exists
  --install           apt-get install missing Debian packages
  --keep-tmp          keep the temp dir (logs) for inspection
  -h, --help          this text
EOF
}

CORES=$(nproc)
PASSES=3
DURATION=3
WORKERS="1 $CORES 15"
CONNS="1 16"
MODES="close keep"
CONTENDERS="fcgi-host libfcgi responder php-fpm"
HOST_ARGS=""
OUT="" CSV="" CHART="" NO_CHART=0
BUILD_DIR="$REPO/build"
REBUILD=0 INSTALL=0 KEEP_TMP=0 SMOKE=0 CALLGRIND=0
WARMUP=0.3 # seconds of load before each measured run, unrecorded

while [[ $# -gt 0 ]]; do
  case $1 in
    --passes) need_arg "$@"; PASSES=$2; shift 2 ;;
    --duration) need_arg "$@"; DURATION=$2; shift 2 ;;
    --workers) need_arg "$@"; WORKERS=$2; shift 2 ;;
    --conns) need_arg "$@"; CONNS=$2; shift 2 ;;
    --modes) need_arg "$@"; MODES=$2; shift 2 ;;
    --contenders) need_arg "$@"; CONTENDERS=$2; shift 2 ;;
    --host-args) need_arg "$@"; HOST_ARGS=$2; shift 2 ;;
    --callgrind) CALLGRIND=1; shift ;;
    --quick) PASSES=1 DURATION=2 WORKERS="1 $CORES"; shift ;;
    --smoke)
      SMOKE=1 PASSES=1 DURATION=0.5 WARMUP=0.1 WORKERS=1 CONNS="1 4" NO_CHART=1
      CONTENDERS="fcgi-host libfcgi responder"
      shift ;;
    --out) need_arg "$@"; OUT=$2; shift 2 ;;
    --csv) need_arg "$@"; CSV=$2; shift 2 ;;
    --chart) need_arg "$@"; CHART=$2; shift 2 ;;
    --no-chart) NO_CHART=1; shift ;;
    --build-dir) need_arg "$@"; BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --rebuild) REBUILD=1; shift ;;
    --install) INSTALL=1; shift ;;
    --keep-tmp) KEEP_TMP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $PASSES =~ ^[1-9][0-9]*$ ]] || die "--passes: a positive integer"
[[ $DURATION =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--duration: seconds"
for w in $WORKERS; do [[ $w =~ ^[1-9][0-9]*$ ]] || die "--workers: positive integers"; done
for c in $CONNS; do [[ $c =~ ^[1-9][0-9]*$ ]] || die "--conns: positive integers"; done
for m in $MODES; do [[ $m == close || $m == keep ]] || die "--modes: close and/or keep"; done
for ct in $CONTENDERS; do
  case $ct in fcgi-host | libfcgi | responder | php-fpm) ;; *) die "--contenders: fcgi-host, libfcgi, responder, php-fpm" ;; esac
done
read -ra HOST_EXTRA <<<"$HOST_ARGS"
if [[ -n $OUT && -z $CSV ]]; then CSV="${OUT%.md}.csv"; fi
if [[ -n $OUT && -z $CHART ]]; then CHART="${OUT%.md}.png"; fi
((NO_CHART)) && CHART=""

# ------------------------------------------------------------- packages --
PHP_FPM=/usr/sbin/php-fpm8.2
has_ct() { [[ " $CONTENDERS " == *" $1 "* ]]; }
missing=() optional=()
have cc || missing+=(gcc)
have cmake || missing+=(cmake)
have taskset || missing+=(util-linux)
have ss || missing+=(iproute2)
pkg-config --exists fcgi 2>/dev/null || missing+=(libfcgi-dev)
{ has_ct libfcgi || has_ct responder; } && ! have spawn-fcgi && missing+=(spawn-fcgi)
((CALLGRIND)) && ! have valgrind && missing+=(valgrind)
has_ct php-fpm && ((!CALLGRIND)) && [[ ! -x $PHP_FPM ]] && optional+=(php8.2-fpm)
[[ -n $CHART ]] && ! have gnuplot && optional+=(gnuplot-nox)
install_packages
if has_ct php-fpm && { ((CALLGRIND)) || [[ ! -x $PHP_FPM ]]; }; then
  ((CALLGRIND)) || note "php-fpm 8.2 is not installed (--install): skipping it"
  CONTENDERS=$(echo " $CONTENDERS " | sed 's/ php-fpm / /; s/^ *//; s/ *$//')
fi
if [[ -n $CHART ]] && ! have gnuplot; then note "gnuplot is not installed (--install): no chart"; CHART=""; fi

# ------------------------------------------------------- process control --
T=$(mktemp -d /tmp/fcgi-bench-direct.XXXXXX)
mkdir -p "$T"/{bin,sock,log,php,run,cg}
PIDS=()
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The generator on CPU 0, the servers on the others (all of them on a 1-CPU machine).
GEN_CPU=0
SERVER_CPUS=$((CORES > 1 ? 1 : 0))-$((CORES - 1))
VALGRIND=()

# start_<contender> W SOCK sets CT_ROOTS: the pids whose process trees are the server.
start_fcgi-host() {
  taskset -c "$SERVER_CPUS" "${VALGRIND[@]}" "$HOST_BIN" --listen "unix:$2" --workers "$1" \
    --app hello "${USER_ARGS[@]}" "${HOST_EXTRA[@]}" >>"$T/log/fcgi-host.log" 2>&1 &
  CT_ROOTS=($!)
  PIDS+=($!)
}
start_spawned() { # BINARY W SOCK
  local pidfile="$T/run/spawned.pid"
  rm -f "$pidfile"
  taskset -c "$SERVER_CPUS" spawn-fcgi -F "$2" -b 1024 -s "$3" -P "$pidfile" -- "${VALGRIND[@]}" "$1" \
    >>"$T/log/spawn-fcgi.log" 2>&1 || die "spawn-fcgi failed: $(tail -3 "$T/log/spawn-fcgi.log")"
  mapfile -t CT_ROOTS < <(tr -s ' \n' '\n' <"$pidfile" | grep -E '^[0-9]+$')
  PIDS+=("${CT_ROOTS[@]}")
}
start_libfcgi() { start_spawned "$LIBFCGI_BIN" "$@"; }
start_responder() { start_spawned "$RESPONDER_BIN" "$@"; }
start_php-fpm() {
  local user=""
  [[ $(id -u) == 0 ]] && user=$'user = root\ngroup = root'
  cat >"$T/php/fpm.conf" <<EOF
[global]
pid = $T/run/php-fpm.pid
error_log = $T/log/php-fpm.log
daemonize = no
[bench]
$user
listen = $2
listen.backlog = 1024
pm = static
pm.max_children = $1
pm.max_requests = 0
EOF
  taskset -c "$SERVER_CPUS" "$PHP_FPM" -F -R -y "$T/php/fpm.conf" -d opcache.enable=1 \
    -d opcache.validate_timestamps=0 >>"$T/log/php-fpm.log" 2>&1 &
  CT_ROOTS=($!)
  PIDS+=($!)
}

# Every pid of the server: the roots and their descendants.
server_pids() {
  local queue=("${CT_ROOTS[@]}") p
  while ((${#queue[@]})); do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    echo "$p"
    mapfile -t -O "${#queue[@]}" queue < <(children_of "$p")
  done
}
# The server's CPU time so far, in ns: every thread of every process (a worker's observer
# thread counts too).
server_cpu_ns() {
  local p sum=0 f v
  for p in $(server_pids); do
    for f in /proc/"$p"/task/*/schedstat; do
      read -r v _ <"$f" 2>/dev/null && sum=$((sum + v))
    done
  done
  echo "$sum"
}

start_contender() { # NAME W
  SOCK="$T/sock/$1-$2.sock"
  rm -f "$SOCK"
  "start_$1" "$2" "$SOCK"
  wait_listening "unix:$SOCK" || { tail -5 "$T"/log/*.log >&2; die "$1 did not listen on $SOCK"; }
  # All W workers up: their first requests are part of no measurement (warm-up below).
  local i n
  for ((i = 0; i < 100; i++)); do
    n=$(server_pids | wc -l)
    ((n >= $2)) && break
    sleep 0.05
  done
}
stop_contender() {
  local all
  mapfile -t all < <(server_pids)
  stop_pids 100 "${CT_ROOTS[@]}" || note "$CT: needed SIGKILL to stop"
  for p in "${all[@]}"; do alive "$p" && kill -KILL "$p" 2>/dev/null; done
  CT_ROOTS=()
}

# load C SECONDS MODE CONTENDER [REQUESTS] -> the generator's line
load() {
  local k=() f=(-p /) n=()
  [[ $3 == keep ]] && k=(-k)
  [[ $4 == php-fpm ]] && f=(-p /ok.php -f "$T/php/ok.php")
  [[ -n ${5:-} ]] && n=(-n "$5")
  taskset -c "$GEN_CPU" "$LOAD_BIN" "unix:$SOCK" -c "$1" -d "$2" "${n[@]}" "${k[@]}" "${f[@]}"
}
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

# ------------------------------------------------------------------ build --
build_host
USER_ARGS=()
[[ $(id -u) == 0 ]] && USER_ARGS=(--user root)
# shellcheck disable=SC2046
LIBFCGI_BIN=$(build_fixture bare-libfcgi bare_libfcgi.c $(pkg-config --cflags --libs fcgi))
RESPONDER_BIN=$(build_fixture limit-responder limit_responder.c)
LOAD_BIN=$(build_fixture fcgi-direct-load fcgi_direct_load.c)
printf '<?php echo "OK";\n' >"$T/php/ok.php"
touch -d '1 hour ago' "$T/php/ok.php" # opcache caches only files older than 2 s

# -------------------------------------------------------------- callgrind --
# Instructions per request in the worker: callgrind counts a server that served N requests and
# one that served 4N; the difference over 3N leaves out start-up and shutdown.
WORKER_PROFILE=""
callgrind_ir() { # CONTENDER REQUESTS -> "requests instructions" of the busiest process
  local ct=$1 line n ir=0 f v best=""
  rm -f "$T"/cg/*
  # A full path (spawn-fcgi execs without a PATH search), and a log file of its own (spawn-fcgi
  # leaves its children without a usable stderr).
  VALGRIND=("$(command -v valgrind)" --tool=callgrind --trace-children=yes --log-file="$T/cg/%p.log"
    --callgrind-out-file="$T/cg/%p.out")
  CT=$ct
  start_contender "$ct" 1
  load 1 60 keep "$ct" 200 >/dev/null # valgrind translates the hot path; buffers grow
  line=$(load 1 600 keep "$ct" "$2")
  n=$(field requests "$line")
  stop_contender
  VALGRIND=()
  for f in "$T"/cg/*.out; do
    # The worker is the process that served: the one with the most instructions.
    v=$(sed -n 's/^summary: \([0-9]*\).*/\1/p; s/^totals: \([0-9]*\).*/\1/p' "$f" | head -1)
    if ((v > ir)); then ir=$v best=$f; fi
  done
  [[ -n $best ]] && cp "$best" "$T/$ct.callgrind" && cp "$best" "$T/$ct-$2.callgrind" # both kept with --keep-tmp
  echo "$((n + 200)) $ir"
}
if ((CALLGRIND)); then
  echo "# Instructions per request (callgrind, W=1, keep-conn, C=1), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| contender | instructions / request |"
  echo "|---|---:|"
  for ct in $CONTENDERS; do
    read -r n1 i1 < <(callgrind_ir "$ct" 1000)
    read -r n2 i2 < <(callgrind_ir "$ct" 4000)
    ((n2 > n1)) || die "$ct: the longer callgrind run served no more requests ($n1, $n2)"
    echo "| $ct | $(((i2 - i1) / (n2 - n1))) |"
  done
  if has_ct fcgi-host && [[ -f $T/fcgi-host.callgrind ]] && have callgrind_annotate; then
    echo
    echo "fcgi-host's worker, the top functions of the longer run (inclusive of nothing: self cost):"
    echo
    echo '```'
    callgrind_annotate "$T/fcgi-host.callgrind" 2>/dev/null | sed -n '/^Ir/,$p' | head -22
    echo '```'
  fi
  exit 0
fi

# ------------------------------------------------------------------- runs --
RAW="$T/raw.csv"
echo "pass,workers,mode,conns,contender,rps,p50_us,p99_us,errors,requests,cpu_us_per_request" >"$RAW"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u +%FT%TZ)
for ((pass = 1; pass <= PASSES; pass++)); do
  read -ra order <<<"$CONTENDERS"
  if ((pass % 2 == 0)); then # A B C, then C B A: a drift of the machine hits all alike
    for ((i = 0, j = ${#order[@]} - 1; i < j; i++, j--)); do t=${order[i]} order[i]=${order[j]} order[j]=$t; done
  fi
  for w in $WORKERS; do
    for CT in "${order[@]}"; do
      start_contender "$CT" "$w"
      for mode in $MODES; do
        for c in $CONNS; do
          load "$c" "$WARMUP" "$mode" "$CT" >/dev/null # warm-up: every worker has run once
          before=$(server_cpu_ns)
          line=$(load "$c" "$DURATION" "$mode" "$CT")
          after=$(server_cpu_ns)
          n=$(field requests "$line")
          us=$(awk -v d=$((after - before)) -v n="$n" 'BEGIN { printf "%.2f", (n > 0 ? d / 1000 / n : 0) }')
          echo "$pass,$w,$mode,$c,$CT,$(field rps "$line"),$(field p50_us "$line"),$(field p99_us "$line"),$(field errors "$line"),$n,$us" >>"$RAW"
          note "pass $pass W=$w $mode C=$c $CT: $line cpu_us=$us"
          if ((SMOKE)) && { ((n == 0)) || [[ $(field errors "$line") != 0 ]]; }; then
            tail -5 "$T"/log/*.log >&2
            die "smoke: $CT W=$w $mode C=$c: $line"
          fi
        done
      done
      stop_contender
    done
  done
done

# ---------------------------------------------------------------- report --
# Medians over passes per cell; the ratios are medians of the per-pass ratios.
SUMMARY="$T/summary.csv"
awk -F, -v contenders="$CONTENDERS" '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  NR > 1 {
    cell = $2 "," $3 "," $4; key = cell "," $5
    if (!(cell in seen)) { seen[cell] = 1; cells[++ncells] = cell }
    rps[key] = rps[key] " " $6; p50[key] = p50[key] " " $7; p99[key] = p99[key] " " $8
    err[key] += $9; cpu[key] = cpu[key] " " $11
    R[$1 "," key] = $6; C[$1 "," key] = $11; passes[$1] = 1
  }
  END {
    print "workers,mode,conns,contender,rps,p50_us,p99_us,errors,cpu_us_per_request,cpu_vs_responder,rps_vs_libfcgi"
    nct = split(contenders, ct, " ")
    for (i = 1; i <= ncells; i++) for (k = 1; k <= nct; k++) {
      key = cells[i] "," ct[k]
      if (!(key in rps)) continue
      vr = ""; vl = ""
      for (p in passes) {
        r = cells[i] ",responder"; l = cells[i] ",libfcgi"
        if (C[p "," r] > 0) vr = vr " " C[p "," key] / C[p "," r]
        if (R[p "," l] > 0) vl = vl " " R[p "," key] / R[p "," l]
      }
      printf "%s,%.0f,%.0f,%.0f,%d,%.2f,%s,%s\n", key, median(rps[key]), median(p50[key]),
        median(p99[key]), err[key], median(cpu[key]),
        vr == "" ? "" : sprintf("%.2f", median(vr)), vl == "" ? "" : sprintf("%.2f", median(vl))
    }
  }' "$RAW" >"$SUMMARY"

# One table per W: rows are contenders, columns the cells (mode, C).
markdown() {
  echo "# Direct FastCGI benchmark (no web server)"
  echo
  echo "\`$COMMAND_LINE\`, $START, $CORES CPUs, load average $LOAD_BEFORE before and"
  echo "$(cut -d' ' -f1-3 /proc/loadavg) after; $PASSES pass(es) of ${DURATION} s, medians. Generator on CPU $GEN_CPU,"
  echo "servers on CPU(s) $SERVER_CPUS, Unix socket, ~600 bytes of params, empty body."
  echo
  awk -F, -v workers="$WORKERS" -v modes="$MODES" -v conns="$CONNS" '
    NR > 1 { key = $1 "," $2 "," $3 "," $4; row[key] = $0; if (!($4 in seen)) { seen[$4] = 1; cts[++n] = $4 } }
    END {
      nw = split(workers, W, " "); nm = split(modes, M, " "); nc = split(conns, CC, " ")
      m = 0
      for (a = 1; a <= nm; a++) for (b = 1; b <= nc; b++) cl[++m] = M[a] "," CC[b]
      for (w = 1; w <= nw; w++) {
        printf "## W=%s\n\n| contender |", W[w]
        for (i = 1; i <= m; i++) { split(cl[i], f, ","); printf " %s C=%s |", f[1], f[2] }
        printf "\n|---|"; for (i = 1; i <= m; i++) printf "---:|"; printf "\n"
        for (k = 1; k <= n; k++) {
          printf "| %s |", cts[k]
          for (i = 1; i <= m; i++) {
            key = W[w] "," cl[i] "," cts[k]
            if (!(key in row)) { printf " – |"; continue }
            split(row[key], f, ",")
            printf " **%s µs** · %s/s · p50 %s p99 %s µs%s |", f[9], f[5], f[6], f[7], (f[8] > 0 ? " · " f[8] " errors" : "")
          }
          printf "\n"
        }
        printf "| fcgi-host CPU ÷ responder |"
        for (i = 1; i <= m; i++) { key = W[w] "," cl[i] ",fcgi-host"; split(row[key], f, ","); printf " %s |", f[10] == "" ? "–" : f[10] "×" }
        printf "\n| fcgi-host req/s ÷ libfcgi |"
        for (i = 1; i <= m; i++) { key = W[w] "," cl[i] ",fcgi-host"; split(row[key], f, ","); printf " %s |", f[11] == "" ? "–" : f[11] "×" }
        printf "\n\n"
      }
      print "Each cell: server CPU per request · req/s · latency. CPU per request is the sum of"
      print "/proc/PID/task/*/schedstat over every process of the server, before and after the run."
    }' "$SUMMARY"
}

chart() { # SUMMARY PNG: CPU per request, one cluster per cell, one bar per contender
  local data="$T/chart.dat"
  awk -F, -v contenders="$CONTENDERS" '
    NR > 1 { cell = "W" $1 " " $2 " C" $3; if (!(cell in seen)) { seen[cell] = 1; cells[++n] = cell }; v[cell "," $4] = $9 }
    END {
      nct = split(contenders, ct, " "); printf "cell"; for (k = 1; k <= nct; k++) printf "\t%s", ct[k]; printf "\n"
      for (i = 1; i <= n; i++) { printf "\"%s\"", cells[i]; for (k = 1; k <= nct; k++) { x = v[cells[i] "," ct[k]]; printf "\t%s", x == "" ? "-" : x }; printf "\n" }
    }' "$1" >"$data"
  local ncols plots="" k
  ncols=$(head -1 "$data" | awk -F'\t' '{ print NF }')
  for ((k = 2; k <= ncols; k++)); do plots+="${plots:+, }'$data' using $k:xtic(1) title columnheader($k)"; done
  gnuplot <<EOF
set terminal pngcairo size 1200,500 noenhanced
set output '$2'
set title 'Server CPU time per request, no web server (lower is better)'
set ylabel 'µs per request'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key top left
set xtics rotate by -30
set grid ytics
set yrange [0:*]
set datafile missing '-'
plot $plots
EOF
}

REPORT=$(markdown)
echo "$REPORT"
if [[ -n $OUT ]]; then echo "$REPORT" >"$OUT"; note "wrote $OUT"; fi
if [[ -n $CSV ]]; then cp "$SUMMARY" "$CSV"; cp "$RAW" "${CSV%.csv}-raw.csv"; note "wrote $CSV"; fi
if [[ -n $CHART ]]; then
  if chart "$SUMMARY" "$CHART" 2>>"$T/log/gnuplot.log"; then note "wrote $CHART"; else note "gnuplot failed: $(tail -3 "$T/log/gnuplot.log")"; fi
fi
