#!/usr/bin/env bash
# scripts/bench.sh — fcgi-host against the bare libfcgi baseline, php-fpm,
# Plack (FCGI.pm + FCGI::ProcManager) and a near-free "limit" responder, each
# behind the same private nginx, measured with wrk (DESIGN.md §4).
#
# Absolute req/s on a shared 2-core machine are noise, so every number that
# matters is a ratio to the baseline measured in the same pass and cell, and
# contenders are interleaved (A B C, then C B A, ...) so that a slow minute of
# the machine hits all of them alike.
#
# Run `scripts/bench.sh --help` for the options.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$REPO/scripts/bench/lib.sh" # die, note, stop_pids, launch_nginx, free_port, ...
COMMAND_LINE="scripts/bench.sh${*:+ $*}"

usage() {
  cat <<'EOF'
Usage: scripts/bench.sh [OPTIONS]

Benchmarks fcgi-host (hello app) against these, all behind one private nginx
(1 worker), with wrk -t1:
  baseline   a bare libfcgi loop started by spawn-fcgi (scripts/bench/)
  php-fpm    php-fpm 8.2, pm=static, opcache
  plack      plackup -s FCGI --manager FCGI::ProcManager (FCGI.pm), a PSGI "OK"
  limit      a near-free epoll responder under spawn-fcgi (scripts/bench/):
             the ceiling, what a FastCGI host could do at most
  baseline-again
             the baseline once more, started afresh in its own slot of each
             pass (not in the default list): the noise floor. Its ratio to the
             baseline would be 1.00 on a quiet machine; its worst pass shows
             how far one pass's ratio swings on this one.
Prints a table (median req/s, p50, p99, errors, ratio to the baseline of the
same pass and cell) and fcgi-host ÷ php-fpm / plack / limit tables, writes
them as Markdown and CSV, optionally a PNG chart, then measures syscalls per
request (strace -c) and worker RSS at W=1 for each contender.

Handlers that do more than answer "OK" (CPU-bound, I/O wait, uploads and
downloads with worker RSS, open-loop overload with --max-queue-time) are
measured by scripts/bench-workloads.sh (see its --help). Head-of-line blocking
beside slow requests, with and without upstream keep-alive (W workers, S slow
requests of D ms, F fast connections), is measured by scripts/bench-hol.sh.

Options:
  --passes N           interleaved passes; medians are over them (default 2)
  --duration D         wrk duration per run, e.g. 5s (default 5s)
  --warmup D           unrecorded wrk run after each (re)start (default 1s; 0 = none)
  --socket S           unix | tcp | both (default both)
  --modes M            close | keepalive | both (default both)
                         close:     one nginx->app connection per request (nginx default)
                         keepalive: upstream keepalive 32 + fastcgi_keep_conn on
  --workers "LIST"     worker counts W (default "1 2 15")
  --conns "LIST"       wrk connections C (default "1 50")
  --contenders "LIST"  among fcgi-host baseline php-fpm plack limit (default:
                       all five; php-fpm and plack are skipped with a note
                       when their packages are missing)
  --host-args "ARGS"   extra arguments for fcgi-host (e.g. a metrics-off switch)
  --quick              short run: 1 pass, 2s, W "1 2", C "50", Unix socket only
                       (later options still override it)
  --smoke              a check that the benchmark itself works, a few seconds:
                       fcgi-host, baseline and limit, 1 pass of 1s, no
                       warm-up, W=2, C=10, Unix socket, both modes, no strace,
                       no chart; the CSVs go to the temp dir unless --csv;
                       any build type is accepted (scripts/test.sh runs it
                       twice in a row on its sanitizer build)
  --out FILE           also write the Markdown report to FILE
  --csv FILE           the per-cell CSV (default: FILE of --out with .csv, else
                       ./bench-results.csv); the raw per-run CSV goes next to it
                       as *-raw.csv
  --chart FILE         PNG chart via gnuplot (default: bench-chart.png next to
                       --out; none without --out); --no-chart to skip it
  --no-syscalls        skip the strace / RSS measurement
  --syscall-duration D wrk -c1 duration while strace is attached (default 2s)
  --build-dir DIR      CMake build directory of fcgi-host (default: build/)
  --rebuild            bring fcgi-host up to date even if the binary exists
  --install            apt-get install missing Debian packages
  --keep-tmp           keep the temp dir (logs, configs) for inspection
  -h, --help           this text

Only loopback TCP addresses and Unix sockets are used. Everything started is
stopped by pid on exit, Ctrl-C included.
EOF
}

# ---------------------------------------------------------------- options --
PASSES=2
DURATION=5s
WARMUP=1s
SOCKETS="unix tcp"
MODES="close keepalive"
WORKERS="1 2 15"
CONNS="1 50"
CONTENDERS="fcgi-host baseline php-fpm plack limit"
HOST_ARGS=""
OUT=""
CSV=""
CHART=""
NO_CHART=0
SYSCALLS=1
SYSCALL_DURATION=2s
BUILD_DIR="$REPO/build"
REBUILD=0
INSTALL=0
KEEP_TMP=0
SMOKE=0

while [[ $# -gt 0 ]]; do
  case $1 in
    --passes) need_arg "$@"; PASSES=$2; shift 2 ;;
    --duration) need_arg "$@"; DURATION=$2; shift 2 ;;
    --warmup) need_arg "$@"; WARMUP=$2; shift 2 ;;
    --socket)
      need_arg "$@"
      case $2 in unix | tcp) SOCKETS=$2 ;; both) SOCKETS="unix tcp" ;; *) die "--socket: unix, tcp or both" ;; esac
      shift 2 ;;
    --modes)
      need_arg "$@"
      case $2 in close | keepalive) MODES=$2 ;; both) MODES="close keepalive" ;; *) die "--modes: close, keepalive or both" ;; esac
      shift 2 ;;
    --workers) need_arg "$@"; WORKERS=$2; shift 2 ;;
    --conns) need_arg "$@"; CONNS=$2; shift 2 ;;
    --contenders) need_arg "$@"; CONTENDERS=$2; shift 2 ;;
    --host-args) need_arg "$@"; HOST_ARGS=$2; shift 2 ;;
    --quick) PASSES=1 DURATION=2s WORKERS="1 2" CONNS="50" SOCKETS=unix; shift ;;
    --smoke)
      SMOKE=1 PASSES=1 DURATION=1s WARMUP=0 WORKERS=2 CONNS=10 SOCKETS=unix SYSCALLS=0 NO_CHART=1
      CONTENDERS="fcgi-host baseline limit"
      shift ;;
    --out) need_arg "$@"; OUT=$2; shift 2 ;;
    --csv) need_arg "$@"; CSV=$2; shift 2 ;;
    --chart) need_arg "$@"; CHART=$2; shift 2 ;;
    --no-chart) NO_CHART=1; shift ;;
    --no-syscalls) SYSCALLS=0; shift ;;
    --syscall-duration) need_arg "$@"; SYSCALL_DURATION=$2; shift 2 ;;
    --build-dir) need_arg "$@"; BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --rebuild) REBUILD=1; shift ;;
    --install) INSTALL=1; shift ;;
    --keep-tmp) KEEP_TMP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# shellcheck disable=SC2086 # the lists are words
{
  positive_ints --passes "$PASSES"
  positive_ints --workers $WORKERS
  positive_ints --conns $CONNS
  words_among --contenders "fcgi-host baseline php-fpm plack limit baseline-again" $CONTENDERS
}
read -ra HOST_EXTRA <<<"$HOST_ARGS" # word splitting is wanted here: "--a 1 --b"

if [[ -n $OUT && -z $CSV ]]; then CSV="${OUT%.md}.csv"; fi
[[ -n $CSV || $SMOKE == 1 ]] || CSV="$PWD/bench-results.csv"
if [[ -z $CHART && -n $OUT ]]; then CHART="$(dirname "$OUT")/bench-chart.png"; fi
((NO_CHART)) && CHART=""

# ------------------------------------------------------------- packages --
# Required tools map to the Debian packages that provide them; php-fpm, Plack
# and gnuplot are optional: without them the contender / the chart is skipped.
PHP_FPM=/usr/sbin/php-fpm8.2
missing=()
have nginx || missing+=(nginx-light)
have wrk || missing+=(wrk)
have curl || missing+=(curl)
have ss || missing+=(iproute2)
have cmake || missing+=(cmake)
have cc || missing+=(gcc)
have pkg-config || missing+=(pkg-config)
pkg-config --exists fcgi 2>/dev/null || missing+=(libfcgi-dev)
has_ct() { [[ " $CONTENDERS " == *" $1 "* ]]; }
drop_ct() { CONTENDERS=$(echo " $CONTENDERS " | sed "s/ $1 / /; s/^ *//; s/ *\$//"); }
# Plack's FCGI handler needs FCGI.pm and FCGI::ProcManager besides plackup.
have_plack() { have plackup && perl -MPlack::Handler::FCGI -MFCGI -MFCGI::ProcManager -e1 2>/dev/null; }
{ has_ct baseline || has_ct baseline-again || has_ct limit; } && ! have spawn-fcgi && missing+=(spawn-fcgi)
((SYSCALLS)) && ! have strace && missing+=(strace)
optional=()
has_ct php-fpm && [[ ! -x $PHP_FPM ]] && optional+=(php8.2-fpm)
has_ct plack && ! have_plack && optional+=(libplack-perl libfcgi-perl libfcgi-procmanager-perl)
[[ -n $CHART ]] && ! have gnuplot && optional+=(gnuplot-nox)

if ((${#missing[@]} + ${#optional[@]})); then
  if ((INSTALL)); then
    note "installing: ${missing[*]} ${optional[*]}"
    apt-get install -y "${missing[@]}" "${optional[@]}" >&2
  elif ((${#missing[@]})); then
    die "missing Debian packages: ${missing[*]} (run with --install, or apt-get install -y ${missing[*]})"
  fi
fi
if has_ct php-fpm && [[ ! -x $PHP_FPM ]]; then
  note "php-fpm 8.2 is not installed (apt-get install -y php8.2-fpm, or --install): skipping it"
  drop_ct php-fpm
fi
if has_ct plack && ! have_plack; then
  note "Plack/FCGI.pm/FCGI::ProcManager not installed (apt-get install -y libplack-perl libfcgi-perl libfcgi-procmanager-perl, or --install): skipping plack"
  drop_ct plack
fi
[[ -n $CONTENDERS ]] || die "no contender left to run"
if [[ -n $CHART ]] && ! have gnuplot; then
  note "gnuplot is not installed (apt-get install -y gnuplot-nox): no chart"
  CHART=""
fi
[[ -r /etc/nginx/fastcgi_params ]] || die "/etc/nginx/fastcgi_params is missing (package nginx-common)"

# ------------------------------------------------------- process control --
T=$(mktemp -d /tmp/fcgi-bench.XXXXXX)
mkdir -p "$T"/{bin,sock,log,nginx,php,plack,run,wrk}
PIDS=() # every process we started and have not stopped yet
[[ -n $CSV ]] || CSV="$T/bench-results.csv" # --smoke leaves nothing behind
RAW_CSV="${CSV%.csv}-raw.csv"

trap cleanup EXIT
trap 'exit 130' INT # exit runs the EXIT trap, so Ctrl-C cleans up too
trap 'exit 143' TERM

# ------------------------------------------------------------- contenders --
# start_<contender> W SOCKET sets:
#   CT_ADDR     what nginx connects to (unix:/path or 127.0.0.1:PORT)
#   CT_STOP     the pids to signal to stop it
#   CT_WORKERS  the worker pids (filled by find_workers)
#   CT_PARENT   the pid whose children are the workers ("" for spawn-fcgi)
SEQ=0

listen_addr() { # SOCKET NAME: a fresh CT_ADDR (not via $(...): SEQ must persist)
  SEQ=$((SEQ + 1))
  if [[ $1 == unix ]]; then CT_ADDR="unix:$T/sock/$2-$SEQ.sock"; else CT_ADDR="127.0.0.1:$(free_port)"; fi
}

start_fcgi-host() {
  local w=$1
  listen_addr "$2" host
  "$HOST_BIN" --listen "$CT_ADDR" --workers "$w" --app hello "${HOST_EXTRA[@]}" \
    >>"$T/log/fcgi-host.log" 2>&1 &
  CT_STOP=($!) CT_PARENT=$! CT_WORKERS=()
  PIDS+=($!)
}

# start_spawned NAME BINARY W SOCKET: W copies of BINARY under spawn-fcgi,
# each given the listening socket on fd 0 (the baseline and limit).
start_spawned() {
  local name=$1 bin=$2 w=$3 pidfile where
  listen_addr "$4" "$name"
  pidfile="$T/run/$name-$SEQ.pid"
  if [[ $CT_ADDR == unix:* ]]; then where=(-s "${CT_ADDR#unix:}"); else where=(-a 127.0.0.1 -p "${CT_ADDR##*:}"); fi
  # spawn-fcgi forks the W children and exits; -P records their pids.
  spawn-fcgi -F "$w" "${where[@]}" -P "$pidfile" -- "$bin" >>"$T/log/$name.log" 2>&1 ||
    die "spawn-fcgi failed: $(tail -3 "$T/log/$name.log")"
  # The pid file is the only record: never look processes up by name, other
  # runs on the same machine start the same programs.
  mapfile -t CT_STOP < <(tr -s ' \n' '\n' <"$pidfile" | grep -E '^[0-9]+$')
  PIDS+=("${CT_STOP[@]}")
  ((${#CT_STOP[@]} == w)) || die "spawn-fcgi recorded ${#CT_STOP[@]} of $w pids in $pidfile"
  CT_PARENT="" CT_WORKERS=("${CT_STOP[@]}")
}

start_baseline() { start_spawned baseline "$BASE_BIN" "$@"; }
start_baseline-again() { start_spawned baseline-again "$BASE_BIN" "$@"; }
start_limit() { start_spawned limit "$LIMIT_BIN" "$@"; }

start_plack() {
  local w=$1 listen
  listen_addr "$2" plack
  listen=${CT_ADDR#unix:}
  # The reference benchmark's command line. plackup stays in the foreground
  # (no --daemonize) and becomes the FCGI::ProcManager manager, which forks
  # the W workers: the manager is $! and the workers are its children.
  # --backlog 1024 as php-fpm's listen.backlog (Plack's default is 100).
  # -E deployment: no development middleware (AccessLog, Lint, StackTrace).
  plackup -s FCGI --listen "$listen" --nproc "$w" --manager FCGI::ProcManager \
    --backlog 1024 -E deployment "$T/plack/app.psgi" >>"$T/log/plack.log" 2>&1 &
  CT_STOP=($!) CT_PARENT=$! CT_WORKERS=()
  PIDS+=($!)
}

start_php-fpm() {
  local w=$1 conf user=""
  listen_addr "$2" php
  conf="$T/php/fpm-$SEQ.conf"
  # php-fpm refuses to run as root unless told to (-R) and given a user.
  [[ $(id -u) == 0 ]] && user=$'user = root\ngroup = root'
  cat >"$conf" <<EOF
[global]
pid = $T/run/php-fpm-$SEQ.pid
error_log = $T/log/php-fpm.log
daemonize = no

[bench]
$user
listen = ${CT_ADDR#unix:}
listen.backlog = 1024
pm = static
pm.max_children = $w
pm.max_requests = 0
EOF
  # opcache.enable is on by default for FPM; say so anyway, and skip the
  # per-request stat() as a production setup would.
  "$PHP_FPM" -F -R -y "$conf" -d opcache.enable=1 -d opcache.validate_timestamps=0 \
    >>"$T/log/php-fpm.log" 2>&1 &
  CT_STOP=($!) CT_PARENT=$! CT_WORKERS=()
  PIDS+=($!)
}

# find_workers W: the workers of a master are its children, once all W exist.
find_workers() {
  local w=$1 i
  [[ -n $CT_PARENT ]] || return 0
  for ((i = 0; i < 200; i++)); do
    mapfile -t CT_WORKERS < <(children_of "$CT_PARENT")
    ((${#CT_WORKERS[@]} >= w)) && return 0
    sleep 0.05
  done
  note "$CT_NAME: only ${#CT_WORKERS[@]} of $w workers after 10 s"
}

start_contender() { # NAME W SOCKET
  CT_NAME=$1
  "start_$1" "$2" "$3"
  wait_listening "$CT_ADDR" || { show_logs; die "$1 did not listen on $CT_ADDR"; }
  find_workers "$2"
  CT_WORKERS_AT_START="${CT_WORKERS[*]}"
}

stop_contender() {
  local left=() p
  # A respawned worker means one crashed under load: worth a line in the notes.
  if [[ -n $CT_PARENT ]]; then
    mapfile -t CT_WORKERS < <(children_of "$CT_PARENT")
    [[ "${CT_WORKERS[*]}" == "$CT_WORKERS_AT_START" ]] ||
      echo "$CT_NAME ($RUN_LABEL): worker pids changed during the runs: [$CT_WORKERS_AT_START] -> [${CT_WORKERS[*]}]" >>"$T/odd.txt"
  fi
  # Masters stop gracefully on TERM; 10 s is plenty with nginx already gone.
  stop_pids 100 "${CT_STOP[@]}" ||
    echo "$CT_NAME ($RUN_LABEL): needed SIGKILL to stop (pids ${CT_STOP[*]})" >>"$T/odd.txt"
  # Workers must not outlive their master.
  for p in "${CT_WORKERS[@]}"; do alive "$p" && left+=("$p"); done
  if ((${#left[@]})); then
    echo "$CT_NAME ($RUN_LABEL): workers ${left[*]} outlived the master; killed" >>"$T/odd.txt"
    kill -KILL "${left[@]}" 2>/dev/null || true
  fi
}

# dead_processes: those of the contender's own pids that are gone. A
# contender never stops by itself during a run: if one is gone it crashed,
# and the run says so at once instead of failing later on a dead socket.
dead_processes() {
  local p
  for p in "${CT_STOP[@]}"; do alive "$p" || echo "$p"; done
}

check_alive() { # WHEN
  local dead
  dead=$(dead_processes | tr '\n' ' ')
  [[ -z $dead ]] && return 0
  echo "$CT_NAME ($RUN_LABEL): processes gone $1: $dead" >>"$T/odd.txt"
  show_logs
  die "$CT_NAME: process(es) $dead died $1 ($RUN_LABEL); see the logs above"
}

show_logs() {
  local f
  for f in "$T"/log/*.log; do
    [[ -s $f ]] || continue
    echo "--- last lines of $(basename "$f"):" >&2
    tail -15 "$f" >&2
  done
}

# ------------------------------------------------------------------ nginx --
start_nginx() { # MODE ADDR
  local mode=$1 addr=$2 keep_upstream="" keep_location=""
  NGX_PORT=$(free_port)
  if [[ $mode == keepalive ]]; then
    keep_upstream=$'keepalive 32;\n        keepalive_timeout 60s;'
    keep_location="fastcgi_keep_conn on;"
  fi
  cat >"$T/nginx/nginx.conf" <<EOF
worker_processes 1;
user root;   # as root nginx would run its worker as www-data: 502 on our 0700 sockets
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/log/nginx-error.log warn;
worker_rlimit_nofile 8192;
events { worker_connections 4096; }
http {
    access_log off;
$(nginx_temp_paths "$T/nginx")
    keepalive_requests 1000000;   # wrk's connections to nginx live for the whole run
    upstream app {
        server $addr;
        $keep_upstream
    }
    server {
        listen 127.0.0.1:$NGX_PORT;
        location / {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $T/php/hello.php;
            fastcgi_param HTTP_X_REQUEST_START "t=\${msec}";
            fastcgi_pass app;
            $keep_location
        }
    }
}
EOF
  launch_nginx "$T/nginx/nginx.conf" "$T/log/nginx-error.log" "$T/log/nginx.log"
  wait_listening "127.0.0.1:$NGX_PORT" || { show_logs; die "nginx did not start"; }
  # The contender is up once a request through nginx gets its "OK". Bounded: 10 s.
  nginx_answers "$NGX_PORT" / 100 && return 0
  check_alive "before nginx got an answer"
  show_logs
  die "no OK from $CT_NAME through nginx"
}

stop_nginx_noting() {
  stop_nginx
  ((NGX_KILLED == 0)) || echo "nginx ($RUN_LABEL): needed SIGKILL" >>"$T/odd.txt"
}

# -------------------------------------------------------------------- wrk --
# parse_wrk FILE -> rps,p50_ms,p99_ms,non2xx,socket_errors,requests
parse_wrk() {
  awk '
    function ms(v,  n, u) {
      n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
      if (u == "us") return n / 1000
      if (u == "s") return n * 1000
      if (u == "m") return n * 60000
      return n                                   # "ms"
    }
    /^Requests\/sec:/          { rps = $2 }
    $1 == "50%"                { p50 = ms($2) }
    $1 == "99%"                { p99 = ms($2) }
    /Non-2xx or 3xx responses/ { non2xx = $NF }
    /Socket errors:/           { gsub(/,/, ""); sockerr = $4 + $6 + $8 + $10 }
    / requests in /            { requests = $1 }
    END { printf "%.2f,%.3f,%.3f,%d,%d,%d\n", rps, p50, p99, non2xx, sockerr, requests }
  ' "$1"
}

run_wrk() { # CONNS DURATION OUTFILE
  # -t1: on 2 cores one wrk thread, one nginx worker and the app share them.
  wrk -t1 -c"$1" -d"$2" --latency "http://127.0.0.1:$NGX_PORT/" >"$3" 2>&1 ||
    echo "wrk ($RUN_LABEL): exit status $? (see output below)" >>"$T/odd.txt"
}

# record_errors CONTENDER WRK_OUTPUT NON2XX REQUESTS NEW_NGINX_ERRLOG_LINES:
# one line per failing run; for fcgi-host, whose errors would be bugs, the
# whole wrk output and the new nginx error-log lines as well.
record_errors() {
  local sockline
  sockline=$(grep -m1 'Socket errors:' "$2" | sed 's/^ *//' || true)
  echo "$1 ($RUN_LABEL): $3 non-2xx, ${sockline:-no socket errors}, $4 requests, $5 new nginx error-log lines" >>"$T/odd.txt"
  if [[ $1 == fcgi-host ]]; then
    sed 's/^/    wrk| /' "$2" >>"$T/odd.txt"
    if (($5 > 0)); then tail -n "$(($5 < 20 ? $5 : 20))" "$T/log/nginx-error.log" | sed 's/^/    nginx| /' >>"$T/odd.txt"; fi
  fi
}

nginx_errlog_lines() { [[ -f $T/log/nginx-error.log ]] && wc -l <"$T/log/nginx-error.log" || echo 0; }

# ------------------------------------------------------------------- main --
build_host
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
# (if, not &&: set -e must stop the run when a build fails inside $(...))
if has_ct baseline || has_ct baseline-again; then BASE_BIN=$(build_fixture bare-libfcgi bare_libfcgi.c $(pkg-config --cflags --libs fcgi)); fi
if has_ct limit; then LIMIT_BIN=$(build_fixture limit-responder limit_responder.c); fi
printf '<?php echo "OK";\n' >"$T/php/hello.php"
echo "sub { [200, ['Content-Type' => 'text/plain'], ['OK']] }" >"$T/plack/app.psgi"
# opcache will not cache a file younger than opcache.file_update_protection
# (2 s): age it, or a quick php-fpm-only run would compile on every request.
touch -d '1 hour ago' "$T/php/hello.php"
: >"$T/odd.txt"

count() { set -- $1; echo $#; }
TOTAL_RUNS=$((PASSES * $(count "$SOCKETS") * $(count "$WORKERS") * $(count "$CONTENDERS") * $(count "$MODES") * $(count "$CONNS")))
note "$TOTAL_RUNS runs of $DURATION (contenders: $CONTENDERS); temp dir $T"
echo "pass,socket,mode,workers,conns,contender,rps,p50_ms,p99_ms,non2xx,socket_errors,requests,nginx_errlog_lines" >"$T/raw.csv"

RUN=0
START_TS=$(date +%s)
# Others may share the machine (compilers, tests): the load average before
# and after goes into the report so a noisy run can be recognised as such.
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((pass = 1; pass <= PASSES; pass++)); do
  # Reverse the contender order on even passes (A B C, C B A, ...) so a drift
  # of the machine's speed does not favour whoever always runs first.
  read -ra order <<<"$CONTENDERS"
  if ((pass % 2 == 0)); then
    rev=()
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do rev+=("${order[i]}"); done
    order=("${rev[@]}")
  fi
  for sock in $SOCKETS; do
    for w in $WORKERS; do
      for ct in "${order[@]}"; do
        RUN_LABEL="pass $pass $sock W=$w"
        start_contender "$ct" "$w" "$sock"
        for mode in $MODES; do
          RUN_LABEL="pass $pass $sock $mode W=$w"
          # A fresh nginx per mode: kept upstream connections from one mode
          # (or one contender) must not leak into the next measurement.
          start_nginx "$mode" "$CT_ADDR"
          if [[ $WARMUP != 0 ]]; then
            maxc=$(printf '%s\n' $CONNS | sort -n | tail -1)
            run_wrk "$maxc" "$WARMUP" "$T/wrk/warmup.txt"
          fi
          for c in $CONNS; do
            RUN=$((RUN + 1))
            RUN_LABEL="pass $pass $sock $mode W=$w C=$c"
            out="$T/wrk/p$pass-$sock-$mode-w$w-c$c-$ct.txt"
            before=$(nginx_errlog_lines)
            run_wrk "$c" "$DURATION" "$out"
            check_alive "during the run"
            after=$(nginx_errlog_lines)
            res=$(parse_wrk "$out")
            echo "$pass,$sock,$mode,$w,$c,$ct,$res,$((after - before))" >>"$T/raw.csv"
            IFS=, read -r rps p50 p99 nx se req <<<"$res"
            if ((nx + se > 0)) || [[ $rps == 0.00 ]]; then
              record_errors "$ct" "$out" "$nx" "$req" $((after - before))
              # A smoke run checks that the benchmark works: nothing served,
              # or an error from fcgi-host, fails it.
              if ((SMOKE)) && [[ $rps == 0.00 || $ct == fcgi-host ]]; then
                cat "$T/odd.txt" >&2
                die "smoke: $ct ($RUN_LABEL) failed"
              fi
            fi
            printf 'bench.sh: [%3d/%d %4ds] pass %d %-4s %-9s W=%-2s C=%-3s %-9s %9s req/s  p50 %7.3f ms  p99 %8.3f ms  err %d\n' \
              "$RUN" "$TOTAL_RUNS" $(($(date +%s) - START_TS)) "$pass" "$sock" "$mode" "$w" "$c" "$ct" "$rps" "$p50" "$p99" $((nx + se)) >&2
          done
          stop_nginx_noting
        done
        stop_contender
      done
    done
  done
done

# --------------------------------------------------------------- summary --
# One row per cell and contender: medians over passes; errors summed; the
# ratio is the median over passes of (contender / baseline of that pass), the
# worst ratio the lowest of them, and fcgi_host_over_this the median over
# passes of (fcgi-host / this contender), the number behind the fcgi-host ÷
# php-fpm / plack tables.
summarize() {
  awk -F, -v sockets="$SOCKETS" -v modes="$MODES" -v workers="$WORKERS" \
    -v conns="$CONNS" -v contenders="$CONTENDERS" '
    function median(list,   a, n, i, j, t) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      if (n == 0) return ""
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR == 1 { next }
    {
      cell = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; key = cell SUBSEP $6
      rps[key] = rps[key] " " $7; p50[key] = p50[key] " " $8; p99[key] = p99[key] " " $9
      nx[key] += $10; se[key] += $11; n[key]++
      per_pass[$1 SUBSEP key] = $7; passes[$1] = 1
    }
    END {
      print "socket,mode,workers,conns,contender,rps,p50_ms,p99_ms,non2xx,socket_errors,ratio_to_baseline,passes,fcgi_host_over_this,worst_pass_ratio_to_baseline"
      ns = split(sockets, S, " "); nm = split(modes, M, " "); nw = split(workers, W, " ")
      nc = split(conns, C, " "); nt = split(contenders, CT, " ")
      for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) for (w = 1; w <= nw; w++) for (c = 1; c <= nc; c++)
        for (t = 1; t <= nt; t++) {
          cell = S[s] SUBSEP M[m] SUBSEP W[w] SUBSEP C[c]; key = cell SUBSEP CT[t]
          if (!(key in n)) continue
          ratios = ""; worst = ""
          for (p in passes) {
            b = p SUBSEP cell SUBSEP "baseline"
            if ((b in per_pass) && per_pass[b] > 0 && ((p SUBSEP key) in per_pass)) {
              pr = per_pass[p SUBSEP key] / per_pass[b]
              ratios = ratios " " pr
              if (worst == "" || pr < worst) worst = pr
            }
          }
          r = median(ratios)
          hratios = ""
          for (p in passes) {
            h = p SUBSEP cell SUBSEP "fcgi-host"
            if ((h in per_pass) && ((p SUBSEP key) in per_pass) && per_pass[p SUBSEP key] > 0)
              hratios = hratios " " per_pass[h] / per_pass[p SUBSEP key]
          }
          hr = median(hratios)
          printf "%s,%s,%s,%s,%s,%.0f,%.3f,%.3f,%d,%d,%s,%d,%s,%s\n", S[s], M[m], W[w], C[c], CT[t],
            median(rps[key]), median(p50[key]), median(p99[key]), nx[key], se[key],
            (r == "" ? "" : sprintf("%.2f", r)), n[key], (hr == "" ? "" : sprintf("%.2f", hr)),
            (worst == "" ? "" : sprintf("%.2f", worst))
        }
    }' "$T/raw.csv"
}

# Markdown: the full table, then each contender ÷ baseline pivot, fcgi-host
# ÷ php-fpm and ÷ plack pivots (same W: they are production servers run the
# same way), then best W against best W (DESIGN.md §4 asks for both) and
# fcgi-host ÷ limit best W against best W (the ceiling: how much of what is
# possible at all fcgi-host reaches, whatever W each needs for it).
markdown_tables() {
  awk -F, -v contenders="$CONTENDERS" -v workers="$WORKERS" -v conns="$CONNS" \
    -v sockets="$SOCKETS" -v modes="$MODES" '
    NR == 1 { next }
    {
      rows[++nr] = $0
      cell = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
      ratio[cell SUBSEP $5] = $11; rps[cell SUBSEP $5] = $6; errs[cell SUBSEP $5] = $9 + $10
      hratio[cell SUBSEP $5] = $13; worst[cell SUBSEP $5] = $14; npass[cell SUBSEP $5] = $12
      bk = $1 SUBSEP $2 SUBSEP $4 SUBSEP $5
      if (!(bk in best) || $6 + 0 > best[bk] + 0) { best[bk] = $6; bestw[bk] = $3 }
    }
    END {
      print "| socket | mode | W | C | contender | req/s (median) | p50 ms | p99 ms | non-2xx | socket errors | × baseline |"
      print "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"
      for (i = 1; i <= nr; i++) {
        split(rows[i], f, ",")
        printf "| %s | %s | %s | %s | %s | %s | %.3f | %.3f | %s | %s | %s |\n", f[1], f[2], f[3], f[4], f[5],
          f[6], f[7], f[8], f[9], f[10], (f[11] == "" ? "–" : f[11] "×")
      }
      nt = split(contenders, CT, " "); nw = split(workers, W, " "); nc = split(conns, C, " ")
      ns = split(sockets, S, " "); nm = split(modes, M, " ")
      has_base = index(" " contenders " ", " baseline ") > 0
      for (t = 1; t <= nt; t++) {
        if (CT[t] == "baseline" || !has_base) continue
        printf "\n**%s ÷ baseline** (median of per-pass ratios; with several passes, the worst pass in brackets)\n\n| W | C |", CT[t]
        for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) printf " %s %s |", S[s], M[m]
        printf "\n|---:|---:|"
        for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) printf "---:|"
        printf "\n"
        for (w = 1; w <= nw; w++) for (c = 1; c <= nc; c++) {
          printf "| %s | %s |", W[w], C[c]
          for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) {
            k = S[s] SUBSEP M[m] SUBSEP W[w] SUBSEP C[c] SUBSEP CT[t]
            b = S[s] SUBSEP M[m] SUBSEP W[w] SUBSEP C[c] SUBSEP "baseline"
            printf " %s%s%s |", ((k in ratio) && ratio[k] != "" ? ratio[k] "×" : "–"),
              ((k in worst) && worst[k] != "" && npass[k] > 1 ? " (" worst[k] "×)" : ""), (errs[b] > 0 ? " †" : "")
          }
          printf "\n"
        }
      }
      if (has_base) printf "\n† the baseline had errors (non-2xx or socket errors) in that cell.\n"
      has_host = index(" " contenders " ", " fcgi-host ") > 0
      for (t = 1; t <= nt; t++) {
        if (!has_host || (CT[t] != "php-fpm" && CT[t] != "plack")) continue
        printf "\n**fcgi-host ÷ %s** (same W; median of per-pass ratios; ‡ = %s had errors in that cell)\n\n| W | C |", CT[t], CT[t]
        for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) printf " %s %s |", S[s], M[m]
        printf "\n|---:|---:|"
        for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) printf "---:|"
        printf "\n"
        for (w = 1; w <= nw; w++) for (c = 1; c <= nc; c++) {
          printf "| %s | %s |", W[w], C[c]
          for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) {
            k = S[s] SUBSEP M[m] SUBSEP W[w] SUBSEP C[c] SUBSEP CT[t]
            printf " %s%s |", ((k in hratio) && hratio[k] != "" ? hratio[k] "×" : "–"), (errs[k] > 0 ? " ‡" : "")
          }
          printf "\n"
        }
      }
      printf "\n**Best W against best W** (median req/s of the best worker count; ratio to the baseline'"'"'s best)\n\n"
      printf "| socket | mode | C |"
      for (t = 1; t <= nt; t++) printf " %s |", CT[t]
      printf "\n|---|---|---:|"
      for (t = 1; t <= nt; t++) printf "---:|"
      printf "\n"
      for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) for (c = 1; c <= nc; c++) {
        printf "| %s | %s | %s |", S[s], M[m], C[c]
        b = S[s] SUBSEP M[m] SUBSEP C[c] SUBSEP "baseline"
        for (t = 1; t <= nt; t++) {
          k = S[s] SUBSEP M[m] SUBSEP C[c] SUBSEP CT[t]
          if (!(k in best)) { printf " – |"; continue }
          if (CT[t] == "baseline" || !(b in best) || best[b] + 0 == 0) printf " %s (W=%s) |", best[k], bestw[k]
          else printf " %s (W=%s) %.2f× |", best[k], bestw[k], best[k] / best[b]
        }
        printf "\n"
      }
      if (has_host && index(" " contenders " ", " limit ") > 0) {
        printf "\n**fcgi-host ÷ limit, best W against best W** (the share of the ceiling fcgi-host reaches)\n\n"
        printf "| socket | mode | C | fcgi-host | limit | fcgi-host ÷ limit |\n|---|---|---:|---:|---:|---:|\n"
        for (s = 1; s <= ns; s++) for (m = 1; m <= nm; m++) for (c = 1; c <= nc; c++) {
          h = S[s] SUBSEP M[m] SUBSEP C[c] SUBSEP "fcgi-host"; l = S[s] SUBSEP M[m] SUBSEP C[c] SUBSEP "limit"
          if (!(h in best) || !(l in best)) continue
          printf "| %s | %s | %s | %s (W=%s) | %s (W=%s) | %s |\n", S[s], M[m], C[c], best[h], bestw[h], best[l], bestw[l],
            (best[l] + 0 > 0 ? sprintf("%.2f×", best[h] / best[l]) : "–")
        }
      }
      if (index(" " modes " ", " close ") == 0 || index(" " modes " ", " keepalive ") == 0) exit
      printf "\n**keepalive ÷ close** (median req/s with upstream keep-alive over median req/s without)\n\n| W | C |"
      for (s = 1; s <= ns; s++) for (t = 1; t <= nt; t++) printf " %s %s |", S[s], CT[t]
      printf "\n|---:|---:|"
      for (s = 1; s <= ns; s++) for (t = 1; t <= nt; t++) printf "---:|"
      printf "\n"
      for (w = 1; w <= nw; w++) for (c = 1; c <= nc; c++) {
        printf "| %s | %s |", W[w], C[c]
        for (s = 1; s <= ns; s++) for (t = 1; t <= nt; t++) {
          kk = S[s] SUBSEP "keepalive" SUBSEP W[w] SUBSEP C[c] SUBSEP CT[t]
          kc = S[s] SUBSEP "close" SUBSEP W[w] SUBSEP C[c] SUBSEP CT[t]
          if ((kk in rps) && (kc in rps) && rps[kc] > 0) printf " %.2f× |", rps[kk] / rps[kc]
          else printf " – |"
        }
        printf "\n"
      }
    }' "$1"
}

chart() { # SUMMARY_CSV PNG: grouped bars of median req/s per cell
  local data="$T/chart.dat"
  awk -F, -v contenders="$CONTENDERS" '
    NR == 1 { next }
    {
      cell = $1 "/" $2 " W" $3 " C" $4
      if (!(cell in seen)) { seen[cell] = 1; order[++n] = cell }
      v[cell SUBSEP $5] = $6
    }
    END {
      nt = split(contenders, CT, " ")
      printf "cell"; for (t = 1; t <= nt; t++) printf "\t%s", CT[t]; printf "\n"
      for (i = 1; i <= n; i++) {
        printf "\"%s\"", order[i]
        for (t = 1; t <= nt; t++) printf "\t%s", ((order[i] SUBSEP CT[t]) in v ? v[order[i] SUBSEP CT[t]] : 0)
        printf "\n"
      }
    }' "$1" >"$data"
  local ncols
  ncols=$(($(count "$CONTENDERS") + 1))
  gnuplot <<EOF
set terminal pngcairo size 1600,700 font ",10"
set output "$2"
set title "$(echo "$CONTENDERS" | sed 's/ / vs /g') behind nginx: median req/s ($(date +%Y-%m-%d), $(nproc) cores, wrk -t1 -d$DURATION, $PASSES passes)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left
set ylabel "req/s"
set yrange [0:*]
set grid ytics
set xtics rotate by -45 scale 0
set rmargin 14   # room for the last rotated label
plot for [i=2:$ncols] "$data" using i:xtic(1) title columnheader(i)
EOF
}

# ------------------------------------------------------- syscalls and RSS --
# Once per contender, W=1, Unix socket (falls back to the first socket asked
# for), close mode: strace -c on the one worker while wrk -c1 runs, then its
# VmRSS. Counts are divided by the requests wrk completed.
syscall_phase() {
  local sock=unix ct worker spid req i
  [[ " $SOCKETS " == *" unix "* ]] || sock=${SOCKETS%% *}
  : >"$T/syscalls.csv"
  : >"$T/rss.csv"
  for ct in $CONTENDERS; do
    [[ $ct == baseline-again ]] && continue # the baseline's own figures
    RUN_LABEL="syscalls $sock close W=1"
    start_contender "$ct" 1 "$sock"
    start_nginx close "$CT_ADDR"
    [[ $WARMUP != 0 ]] && run_wrk 1 "$WARMUP" "$T/wrk/warmup.txt"
    worker=${CT_WORKERS[0]}
    strace -c -f -q -p "$worker" -o "$T/strace-$ct.txt" 2>>"$T/log/strace.log" &
    spid=$!
    PIDS+=("$spid")
    # Start the load only once strace is attached (TracerPid set). Bounded: 5 s.
    for ((i = 0; i < 100; i++)); do
      [[ $(awk '/^TracerPid:/ {print $2}' "/proc/$worker/status") != 0 ]] && break
      sleep 0.05
    done
    run_wrk 1 "$SYSCALL_DURATION" "$T/wrk/strace-$ct.txt"
    kill -INT "$spid" 2>/dev/null || true # strace -c prints its summary on detach
    for ((i = 0; i < 100; i++)); do alive "$spid" || break; sleep 0.05; done
    stop_pids 10 "$spid" || true
    req=$(parse_wrk "$T/wrk/strace-$ct.txt" | cut -d, -f6)
    awk -v ct="$ct" -v req="$req" '
      /^-+ / { sep++; next }
      sep >= 1 && NF >= 5 && $1 != "%" { printf "%s,%s,%s,%s,%s\n", ct, $NF, $4, (NF == 6 ? $5 : 0), req }
    ' "$T/strace-$ct.txt" >>"$T/syscalls.csv"
    local wrss wanon mrss=""
    wrss=$(awk '/^VmRSS:/ {print $2}' "/proc/$worker/status")
    wanon=$(awk '/^RssAnon:/ {print $2}' "/proc/$worker/status")
    [[ -n $CT_PARENT ]] && mrss=$(awk '/^VmRSS:/ {print $2}' "/proc/$CT_PARENT/status")
    echo "$ct,$wrss,$wanon,${mrss:-},$req" >>"$T/rss.csv"
    note "syscalls: $ct worker $worker: $req requests traced; VmRSS ${wrss} kB"
    stop_nginx_noting
    stop_contender
  done
}

syscall_tables() {
  # Per request: one column per contender, syscalls sorted by the busiest.
  awk -F, -v contenders="$CONTENDERS" -v rssfile="$T/rss.csv" '
    FILENAME == rssfile { rss[$1] = $2; anon[$1] = $3; mrss[$1] = $4; next }
    {
      ct = $1; sc = $2; per = ($5 > 0 ? $3 / $5 : 0)
      calls[ct SUBSEP sc] = per; errs[ct SUBSEP sc] = ($5 > 0 ? $4 / $5 : 0); req[ct] = $5
      if (!(sc in seen)) { seen[sc] = 1; names[++n] = sc }
      if (sc != "total") weight[sc] += per
    }
    END {
      nt = split(contenders, CT, " ")
      printf "| syscall |"; for (t = 1; t <= nt; t++) printf " %s |", CT[t]; printf "\n|---|"
      for (t = 1; t <= nt; t++) printf "---:|"; printf "\n"
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (names[j] != "total" && (names[i] == "total" || weight[names[j]] > weight[names[i]])) { x = names[i]; names[i] = names[j]; names[j] = x }
      for (i = 1; i <= n; i++) {
        if (names[i] == "total") continue
        printf "| %s |", names[i]
        for (t = 1; t <= nt; t++) {
          k = CT[t] SUBSEP names[i]
          if (k in calls) printf " %.2f%s |", calls[k], (errs[k] >= 0.005 ? sprintf(" (%.2f failed)", errs[k]) : "")
          else printf " – |"
        }
        printf "\n"
      }
      printf "| **total** |"
      for (t = 1; t <= nt; t++) { k = CT[t] SUBSEP "total"; printf " **%s** |", (k in calls ? sprintf("%.2f", calls[k]) : "–") }
      printf "\n| requests traced |"
      for (t = 1; t <= nt; t++) printf " %s |", req[CT[t]]
      printf "\n\n| contender | worker VmRSS kB | worker RssAnon kB | master VmRSS kB | worker RSS ÷ baseline |\n|---|---:|---:|---:|---:|\n"
      for (t = 1; t <= nt; t++) {
        c = CT[t]
        if (!(c in rss)) continue
        printf "| %s | %s | %s | %s | %s |\n", c, rss[c], anon[c], (mrss[c] == "" ? "– (spawn-fcgi exits)" : mrss[c]),
          (("baseline" in rss) && rss["baseline"] > 0 ? sprintf("%.2f×", rss[c] / rss["baseline"]) : "–")
      }
    }' "$T/rss.csv" "$T/syscalls.csv"
}

# ---------------------------------------------------------------- report --
if ((SYSCALLS)); then syscall_phase; fi

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$(($(date +%s) - START_TS))
summarize >"$T/summary.csv"
mkdir -p "$(dirname "$CSV")"
cp "$T/summary.csv" "$CSV"
cp "$T/raw.csv" "$RAW_CSV"

host_commit=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
host_dirty=$(git -C "$REPO" status --porcelain 2>/dev/null | wc -l)
php_version=$([[ -x $PHP_FPM ]] && "$PHP_FPM" -v | head -1 | awk '{print $1, $2}' || echo "not installed")
plack_versions=$(perl -MPlack -MFCGI -MFCGI::ProcManager \
  -e 'print "Plack $Plack::VERSION, FCGI.pm $FCGI::VERSION, FCGI::ProcManager $FCGI::ProcManager::VERSION"' 2>/dev/null ||
  echo "Plack not installed")
{
  echo "# fcgi-host benchmark"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM, $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r)"
  echo "- software: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'), libfcgi $(pkg-config --modversion fcgi), spawn-fcgi $(spawn-fcgi -v 2>/dev/null | head -1 | awk '{print $2}'), $php_version, $plack_versions, perl $(perl -e 'printf "%vd", $^V')"
  echo "- contenders: $CONTENDERS — baseline = scripts/bench/bare_libfcgi.c under spawn-fcgi -F W; php-fpm = pm=static, opcache; plack = \`plackup -s FCGI --listen ADDR --nproc W --manager FCGI::ProcManager --backlog 1024 -E deployment\` with a one-line PSGI app; limit = scripts/bench/limit_responder.c under spawn-fcgi -F W (epoll, canned reply: the ceiling); baseline-again = the baseline once more in its own slot (the noise floor of a per-pass ratio)"
  echo "- fcgi-host: commit $host_commit ($host_dirty uncommitted paths in the tree), $(basename "$BUILD_DIR")/ $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD_DIR/CMakeCache.txt") build${HOST_ARGS:+, extra args: $HOST_ARGS}"
  echo "- command: \`$COMMAND_LINE\` ($((ELAPSED / 60)) min $((ELAPSED % 60)) s; load average $LOAD_BEFORE before, $LOAD_AFTER after)"
  echo "- method: wrk -t1 -cC -d$DURATION --latency against one nginx worker; $PASSES interleaved pass(es) (contender order reversed on even passes); fresh nginx per contender and mode; ${WARMUP} unrecorded warm-up after each start; medians over passes; errors summed over passes; × baseline = median of per-pass ratios to the baseline in the same cell"
  echo "- modes: **close** = one nginx→app connection per request (nginx default); **keepalive** = \`upstream { keepalive 32; keepalive_timeout 60s; }\` + \`fastcgi_keep_conn on\`"
  echo
  echo "## Throughput and latency"
  echo
  markdown_tables "$T/summary.csv"
  if ((SYSCALLS)); then
    echo
    echo "## Syscalls per request (worker, W=1, close mode, strace -c -f, wrk -c1 -d$SYSCALL_DURATION) and RSS"
    echo
    syscall_tables
  fi
  if [[ -s $T/odd.txt ]]; then
    echo
    echo "## Oddities recorded during the run"
    echo
    echo '```'
    head -200 "$T/odd.txt"
    echo '```'
  fi
  notable=$(grep -hiE '\b(warn|error|crit|alert|emerg)\b' "$T"/log/fcgi-host.log "$T"/log/nginx-error.log 2>/dev/null | head -40 || true)
  if [[ -n $notable ]]; then
    echo
    echo "## Warnings and errors in the fcgi-host and nginx logs (first 40)"
    echo
    echo '```'
    echo "$notable"
    echo '```'
  fi
} >"$T/report.md"

cat "$T/report.md"
if [[ -n $OUT ]]; then
  mkdir -p "$(dirname "$OUT")"
  cp "$T/report.md" "$OUT"
  note "wrote $OUT"
fi
note "wrote $CSV and $RAW_CSV"
if [[ -n $CHART ]]; then
  if chart "$T/summary.csv" "$CHART" 2>>"$T/log/gnuplot.log"; then note "wrote $CHART"; else note "gnuplot failed: $(tail -3 "$T/log/gnuplot.log")"; fi
fi
