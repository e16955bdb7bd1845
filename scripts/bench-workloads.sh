#!/usr/bin/env bash
# scripts/bench-workloads.sh — beyond "OK": the same realistic work in fcgi-host, a libfcgi C
# loop, php-fpm and Plack, behind one private nginx. scripts/bench.sh measures the "OK" handler;
# this script measures CPU-bound and I/O-wait handlers, uploads and downloads (with worker RSS),
# and open-loop overload. Run `scripts/bench-workloads.sh --help` for the options.
#
# Absolute figures on a shared 2-core machine are noise: compare contenders within one run.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$REPO/scripts/bench/lib.sh"
COMMAND_LINE="scripts/bench-workloads.sh${*:+ $*}"

usage() {
  cat <<'EOF'
Usage: scripts/bench-workloads.sh [OPTIONS]

The same work in every contender, behind one private nginx (1 worker):
  fcgi-host  the bench plugin scripts/bench/work_plugin.cpp (--app libbench_work.so)
  libfcgi    scripts/bench/work_libfcgi.c, an FCGX_Accept_r loop under spawn-fcgi -F W
  php-fpm    scripts/bench/work.php, pm=static, opcache
  plack      scripts/bench/work.psgi, plackup -s FCGI --manager FCGI::ProcManager
(php-fpm and plack are skipped with a note when their Debian packages are missing.)

Scenarios (--scenarios):
  cpu       /cpu?n=N: a deterministic integer loop of ~200 µs of CPU per request, at
            W = 1, 2 (cores), 15; wrk -t1 -c50. N is calibrated per language at the start
            (the same loop runs ~10-60x slower per turn in PHP and Perl than in C), so
            every contender burns about the same CPU time per request: the N of each is
            printed with the results.
  io        /io?ms=5: sleeps 5 ms (a database call) at W = 2, 15; wrk -t1 -c50.
  threads   /io?ms=20 (a handler that waits 20 ms, as on a database), 64 clients
            (wrk -t1 -c64): fcgi-host at W x T (--workers x --threads) = 2x32,
            4x16 and 64x1, php-fpm with 64 children, the libfcgi loop with 64
            processes: req/s, p50/p99, the PSS of all the contender's processes
            (master included) at the end of the run, and their CPU time per request.
  sqlite    /sqlite: one indexed lookup by a random key in a 10 000-row SQLite file
            the script creates, one connection per thread (fcgi-host: each handler
            thread's instance opens its own in on_thread_start(),
            scripts/bench/sqlite_plugin.cpp), per child (php-fpm, persistent PDO,
            work_sqlite.php) or per process (the libfcgi loop, work_sqlite.c); the
            cells and columns of threads. Needs libsqlite3-dev, the sqlite3 shell and,
            for php-fpm, php8.2-sqlite3 (skipped with a note when missing).
  updown    uploads (1 MiB POST bodies, wrk -c8) and downloads (10 MiB streamed
            responses, wrk -c4) at W = 2, in MB/s, with the workers' RSS before, at
            the peak during, and after the run, and their system calls and CPU time
            per MiB (perf stat); nginx serving the same 10 MiB from a static file is
            the download ceiling. fcgi-host also: uploads its handler reads as they
            arrive (Request::body_reader()), send_file() of the 10 MiB file streamed
            and handed to nginx (X-Accel-Redirect), and one 100 MiB upload read as it
            arrives, with the worker's RSS before and at its peak.
  overload  open-loop arrivals at 0.8x, 1.5x and 3x each contender's capacity
            (req/s of /cpu at W = 2, wrk -c50, measured right before its cells),
            from scripts/bench/open_loop.c (fixed arrival rate over kept connections
            to nginx; a request unanswered after 1 s is given up and its connection
            closed, as a client with a 1 s timeout does; why not h2load --h1 --rate:
            see that file): goodput (2xx within 1 s per second), p50/p99 of those,
            errors by kind (503, other 5xx, no answer within 1 s, connection
            errors). fcgi-host runs twice: as is, and with --max-queue-time.
Default: all six.

Options:
  --scenarios "LIST"    among cpu io threads sqlite updown overload (default: all)
  --contenders "LIST"   among fcgi-host libfcgi php-fpm plack (default: all)
  --duration S          seconds per cell (default 3)
  --cpu-us US           CPU time per /cpu request to calibrate for (default 200)
  --wait-ms MS          the threads scenario's wait per request (default 20)
  --max-queue-time MS   fcgi-host's shedding threshold in the overload scenario
                        (default 300: under the 1 s client timeout with room for the
                        handler and nginx)
  --host-args "ARGS"    extra fcgi-host arguments, in every scenario
  --out FILE            also write the Markdown report to FILE
  --chart FILE          PNG chart of the overload curves via gnuplot (default:
                        bench-workloads-chart.png next to --out); the threads
                        scenario's chart (req/s and PSS per contender) goes
                        beside it as bench-workloads-threads.png
  --build-dir DIR       a Release CMake build directory (default: build-bench/)
  --keep-tmp            keep the temp dir (logs, configs, h2load logs)
  -h, --help            this text

Only 127.0.0.1 and Unix sockets are used. Every process started is tracked by pid and
stopped on exit, Ctrl-C included; every load run is bounded in time.
EOF
}

SCENARIOS="cpu io threads sqlite updown overload"
CONTENDERS="fcgi-host libfcgi php-fpm plack"
DURATION=3
CPU_US=200
WAIT_MS=20
MAX_QUEUE_MS=300
HOST_ARGS=""
OUT=""
CHART=""
BUILD_DIR="$REPO/build-bench"
KEEP_TMP=0


while [[ $# -gt 0 ]]; do
  case $1 in
    --scenarios) need_arg "$@"; SCENARIOS=$2; shift 2 ;;
    --contenders) need_arg "$@"; CONTENDERS=$2; shift 2 ;;
    --duration) need_arg "$@"; DURATION=$2; shift 2 ;;
    --cpu-us) need_arg "$@"; CPU_US=$2; shift 2 ;;
    --wait-ms) need_arg "$@"; WAIT_MS=$2; shift 2 ;;
    --max-queue-time) need_arg "$@"; MAX_QUEUE_MS=$2; shift 2 ;;
    --host-args) need_arg "$@"; HOST_ARGS=$2; shift 2 ;;
    --out) need_arg "$@"; OUT=$(realpath -m "$2"); shift 2 ;;
    --chart) need_arg "$@"; CHART=$(realpath -m "$2"); shift 2 ;;
    --build-dir) need_arg "$@"; BUILD_DIR=$(realpath -m "$2"); shift 2 ;;
    --keep-tmp) KEEP_TMP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
positive_ints --duration "$DURATION"
positive_ints --cpu-us "$CPU_US"
positive_ints --wait-ms "$WAIT_MS"
positive_ints --max-queue-time "$MAX_QUEUE_MS"
# shellcheck disable=SC2086 # the lists are words
{
  words_among --scenarios "cpu io threads sqlite updown overload" $SCENARIOS
  words_among --contenders "fcgi-host libfcgi php-fpm plack" $CONTENDERS
}
read -ra HOST_EXTRA <<<"$HOST_ARGS"
if [[ -z $CHART && -n $OUT ]]; then CHART="$(dirname "$OUT")/bench-workloads-chart.png"; fi

has() { [[ " $1 " == *" $2 "* ]]; }
for tool in nginx wrk curl spawn-fcgi cmake cc pkg-config; do
  have "$tool" || die "missing $tool (Debian: nginx-light wrk curl spawn-fcgi cmake gcc pkg-config)"
done
PHP_FPM=/usr/sbin/php-fpm8.2
if has "$CONTENDERS" php-fpm && { [[ ! -x $PHP_FPM ]] || ! have php; }; then
  note "php-fpm 8.2 / php CLI not installed (apt-get install -y php8.2-fpm php8.2-cli): skipping php-fpm"
  CONTENDERS=${CONTENDERS/php-fpm/}
fi
if has "$CONTENDERS" plack && ! perl -MPlack::Handler::FCGI -MFCGI::ProcManager -e1 2>/dev/null; then
  note "Plack not installed (apt-get install -y libplack-perl libfcgi-perl libfcgi-procmanager-perl): skipping plack"
  CONTENDERS=${CONTENDERS/plack/}
fi
read -ra CTS <<<"$CONTENDERS"
((${#CTS[@]})) || die "no contender left"
SQLITE_NO_PHP=0
if has "$SCENARIOS" sqlite; then
  if ! pkg-config --exists sqlite3 || ! have sqlite3; then
    note "libsqlite3-dev or the sqlite3 shell missing (apt-get install -y libsqlite3-dev sqlite3): skipping the sqlite scenario"
    SCENARIOS=${SCENARIOS/sqlite/}
  elif has "$CONTENDERS" php-fpm && ! "$PHP_FPM" -m 2>/dev/null | grep -qx pdo_sqlite; then
    note "php-fpm has no pdo_sqlite (apt-get install -y php8.2-sqlite3): php-fpm sits out the sqlite scenario"
    SQLITE_NO_PHP=1
  fi
fi

# ------------------------------------------------------- process control --
T=$(mktemp -d /tmp/fcgi-workloads.XXXXXX)
mkdir -p "$T"/{bin,sock,log,nginx,static,run,out}
PIDS=() # every process started and not yet stopped: stopped by pid on every exit path


cleanup() {
  trap - EXIT INT TERM
  ((${#PIDS[@]})) && { stop_pids 50 "${PIDS[@]}" || true; }
  if ((KEEP_TMP)); then note "temp dir kept: $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# ------------------------------------------------------------------ build --
[[ -f $BUILD_DIR/CMakeCache.txt ]] || cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DFCGI_HOST_TESTS=OFF >"$T/log/build.log" 2>&1 ||
  die "cmake configure failed (see $T/log/build.log)"
grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "$BUILD_DIR/CMakeCache.txt" || die "$BUILD_DIR is not a Release build"
note "building fcgi-host, the bench plugin and the libfcgi loop in $BUILD_DIR"
SQLITE_TARGETS=()
has "$SCENARIOS" sqlite && SQLITE_TARGETS=(bench_sqlite work-sqlite)
cmake --build "$BUILD_DIR" -j2 --target fcgi-host bench_work work-libfcgi "${SQLITE_TARGETS[@]}" >>"$T/log/build.log" 2>&1 ||
  { tail -20 "$T/log/build.log" >&2; die "build failed"; }
# Private copies: others may rebuild the tree during the run.
cp "$BUILD_DIR/fcgi_host/fcgi-host" "$BUILD_DIR/scripts/bench/libbench_work.so" \
  "$BUILD_DIR/scripts/bench/work-libfcgi" "$T/bin/"
cp "$REPO/scripts/bench/work.php" "$REPO/scripts/bench/work.psgi" "$T/bin/"
if has "$SCENARIOS" sqlite; then
  cp "$BUILD_DIR/scripts/bench/libbench_sqlite.so" "$BUILD_DIR/scripts/bench/work-sqlite" "$T/bin/"
  cp "$REPO/scripts/bench/work_sqlite.php" "$T/bin/"
  touch -d '1 hour ago' "$T/bin/work_sqlite.php"
fi
cc -O2 -o "$T/bin/open-loop" "$REPO/scripts/bench/open_loop.c" || die "building open_loop.c failed"
touch -d '1 hour ago' "$T/bin/work.php" # opcache skips files younger than 2 s
head -c $((10 << 20)) /dev/zero | tr '\0' 'd' >"$T/static/10m.bin"
# send_file() runs in a worker, which runs as nobody when the script runs as root: it must reach it.
chmod o+x "$T" && chmod o+rx "$T/static" && chmod o+r "$T/static/10m.bin"
head -c $((1 << 20)) /dev/zero | tr '\0' 'u' >"$T/upload.bin"
# The sqlite scenario's file: SQLITE_ROWS rows, k a permutation of 1..SQLITE_ROWS (7919 is a prime
# that does not divide it) under an index, so a lookup by k walks the index, then the table.
SQLITE_ROWS=10000
if has "$SCENARIOS" sqlite; then
  mkdir -p "$T/db"
  sqlite3 "$T/db/bench.sqlite" <<EOF || die "creating the SQLite file failed"
CREATE TABLE items (id INTEGER PRIMARY KEY, k INTEGER NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $SQLITE_ROWS)
INSERT INTO items (k, name, value) SELECT (i * 7919) % $SQLITE_ROWS + 1, 'item ' || i, (i * 37) % 1000 FROM n;
CREATE UNIQUE INDEX items_k ON items (k);
EOF
  # Read by the workers, which run as nobody when the script runs as root.
  chmod o+rx "$T/db" && chmod o+r "$T/db/bench.sqlite"
  # The libfcgi loop (spawn-fcgi keeps the environment) and php-fpm (env[] in its pool) read these;
  # fcgi-host gets them with --env.
  export BENCH_SQLITE_DB="$T/db/bench.sqlite" BENCH_SQLITE_ROWS=$SQLITE_ROWS
fi

# ------------------------------------------------------------ calibration --
# Turns of the loop per second in each language, from a 0.2-0.5 s run of the same loop; N for
# --cpu-us is then turns/s x cpu-us. C is the loop of work_plugin.cpp and work_libfcgi.c.
cat >"$T/calib.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static uint64_t spin(long n) {
  uint64_t x = 1;
  for (long i = 0; i < n; ++i) x = (x * 1103515245u + 12345u) & 0x7fffffffu;
  return x;
}
int main(int argc, char** argv) {
  long n = atol(argv[1]);
  struct timespec a, b;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  volatile uint64_t r = spin(n);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  (void)r;
  printf("%.0f\n", n / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
  return 0;
}
EOF
cc -O2 -o "$T/bin/calib" "$T/calib.c"
best_of_3() { # command...: the highest of three rates (the least disturbed by other load)
  local best=0 r i
  for i in 1 2 3; do r=$("$@"); r=${r%.*}; ((r > best)) && best=$r; done
  echo "$best"
}
RATE_C=$(best_of_3 "$T/bin/calib" 200000000)
N_C=$((RATE_C * CPU_US / 1000000))
N_PHP="" N_PERL=""
if has "$CONTENDERS" php-fpm; then
  # CPU time, not wall time: on a loaded machine wall time would count other processes' turns.
  RATE_PHP=$(best_of_3 php -n -r '$n=5000000;$c=function(){$r=getrusage();return $r["ru_utime.tv_sec"]+$r["ru_utime.tv_usec"]/1e6;};$t=$c();$x=1;for($i=0;$i<$n;$i++)$x=($x*1103515245+12345)&0x7fffffff;printf("%.0f",$n/($c()-$t));')
  N_PHP=$((RATE_PHP * CPU_US / 1000000))
fi
if has "$CONTENDERS" plack; then
  RATE_PERL=$(best_of_3 perl -e 'my $n=3000000;my $t=(times)[0];my $x=1;for(my $i=0;$i<$n;$i++){$x=($x*1103515245+12345)&0x7fffffff;} printf("%.0f",$n/((times)[0]-$t));')
  N_PERL=$((RATE_PERL * CPU_US / 1000000))
fi
cpu_n() { case $1 in php-fpm) echo "$N_PHP" ;; plack) echo "$N_PERL" ;; *) echo "$N_C" ;; esac; }
note "loop turns for ${CPU_US} µs: C/C++ $N_C${N_PHP:+, PHP $N_PHP}${N_PERL:+, Perl $N_PERL}"

# ------------------------------------------------------------- contenders --
# start_contender NAME W [EXTRA fcgi-host args...]: sets ADDR (unix:path), STOP (pids), and
# waits until a request through a fresh nginx answers (see start_nginx).
SEQ=0
start_contender() {
  local ct=$1 w=$2
  shift 2
  SEQ=$((SEQ + 1))
  ADDR="unix:$T/sock/$ct-$SEQ.sock"
  local path=${ADDR#unix:}
  case $ct in
    fcgi-host)
      "$T/bin/fcgi-host" --listen "$ADDR" --workers "$w" --app "$T/bin/${HOST_APP:-libbench_work.so}" \
        --max-body "${MAX_BODY:-4m}" "${HOST_EXTRA[@]}" "$@" >>"$T/log/fcgi-host.log" 2>&1 &
      STOP=($!) ;;
    libfcgi)
      spawn-fcgi -F "$w" -s "$path" -P "$T/run/libfcgi-$SEQ.pid" -- "$T/bin/${LIBFCGI_PROG:-work-libfcgi}" \
        >>"$T/log/libfcgi.log" 2>&1 || die "spawn-fcgi failed"
      mapfile -t STOP < <(tr -s ' \n' '\n' <"$T/run/libfcgi-$SEQ.pid" | grep -E '^[0-9]+$')
      ((${#STOP[@]} == w)) || die "spawn-fcgi recorded ${#STOP[@]} of $w pids" ;;
    php-fpm)
      local user=""
      [[ $(id -u) == 0 ]] && user=$'user = root\ngroup = root'
      cat >"$T/run/fpm-$SEQ.conf" <<EOF
[global]
pid = $T/run/php-fpm-$SEQ.pid
error_log = $T/log/php-fpm.log
daemonize = no
[work]
$user
listen = $path
listen.backlog = 1024
pm = static
pm.max_children = $w
pm.max_requests = 0
${BENCH_SQLITE_DB:+env[BENCH_SQLITE_DB] = $BENCH_SQLITE_DB}
${BENCH_SQLITE_ROWS:+env[BENCH_SQLITE_ROWS] = $BENCH_SQLITE_ROWS}
EOF
      "$PHP_FPM" -F -R -y "$T/run/fpm-$SEQ.conf" -d opcache.enable=1 -d opcache.validate_timestamps=0 \
        -d post_max_size=4M >>"$T/log/php-fpm.log" 2>&1 &
      STOP=($!) ;;
    plack)
      plackup -s FCGI --listen "$path" --nproc "$w" --manager FCGI::ProcManager --backlog 1024 \
        -E deployment "$T/bin/work.psgi" >>"$T/log/plack.log" 2>&1 &
      STOP=($!) ;;
  esac
  PIDS+=("${STOP[@]}")
  CT=$ct
}

# The workers: a master's children, or the spawn-fcgi processes themselves.
workers_of() {
  if [[ $CT == libfcgi ]]; then printf '%s\n' "${STOP[@]}"; else children_of "${STOP[0]}"; fi
}

stop_contender() { stop_pids 50 "${STOP[@]}" || true; STOP=(); }

# One nginx for the contender: all paths to it, /static/ from a file, arrival stamps on.
start_nginx() {
  NGX_PORT=$(free_port)
  cat >"$T/nginx/nginx.conf" <<EOF
worker_processes 1;
user root;
daemon off;
pid $T/nginx/nginx.pid;
error_log $T/log/nginx-error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
    access_log off;
$(nginx_temp_paths "$T/nginx")
    keepalive_requests 1000000;
    client_max_body_size 128m;
    client_body_buffer_size 2m;
    server {
        listen 127.0.0.1:$NGX_PORT backlog=4096;
        location /static/ { root $T; }
        location /internal/ { internal; alias /; }
        location / {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $T/bin/${PHP_SCRIPT:-work.php};
            fastcgi_param HTTP_X_REQUEST_START "t=\${msec}";
            fastcgi_pass $ADDR;
        }
    }
}
EOF
  launch_nginx "$T/nginx/nginx.conf" "$T/log/nginx-error.log" "$T/log/nginx.log"
  # Ready when a real request through nginx gets the contender's answer (not when a socket
  # exists). Bounded: 15 s.
  nginx_answers "$NGX_PORT" / 150 && return 0
  tail -5 "$T"/log/*.log >&2
  die "no OK from $CT through nginx"
}

# ------------------------------------------------------------------- load --
# wrk_run CONNS PATH OUT [LUA]: prints "rps,p50_ms,p99_ms,errors,MB/s".
wrk_run() {
  local lua=()
  [[ -n ${4:-} ]] && lua=(-s "$4")
  wrk -t1 -c"$1" -d"${DURATION}s" --latency --timeout 10s "${lua[@]}" "http://127.0.0.1:$NGX_PORT$2" >"$3" 2>&1 || true
  awk '
    function ms(v,  n, u) { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
      return u == "us" ? n / 1000 : u == "s" ? n * 1000 : u == "m" ? n * 60000 : n }
    function mb(v,  n, u) { n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
      return u == "GB" ? n * 1024 : u == "KB" ? n / 1024 : u == "B" ? n / 1048576 : n }
    /^Requests\/sec:/ { rps = $2 } /^Transfer\/sec:/ { tput = mb($2) }
    $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
    /Non-2xx/ { err += $NF } /Socket errors:/ { gsub(/,/, ""); err += $4 + $6 + $8 + $10 }
    END { printf "%.0f,%.2f,%.2f,%d,%.1f\n", rps, p50, p99, err, tput }' "$3"
}

rss_sum_kib() { # the workers' VmRSS, summed, and the largest: "sum max"
  local p r sum=0 max=0
  for p in $(workers_of); do
    r=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    sum=$((sum + r)); ((r > max)) && max=$r
  done
  echo "$sum $max"
}

# Every process of the contender: the master (fcgi-host, php-fpm, plack) and its children, or
# the spawn-fcgi processes.
all_procs() { if [[ $CT == libfcgi ]]; then printf '%s\n' "${STOP[@]}"; else echo "${STOP[0]}"; workers_of; fi; }

pss_sum_kib() { # the PSS of all the contender's processes, summed (shared pages split fairly)
  local p sum=0 r
  for p in $(all_procs); do
    r=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    sum=$((sum + ${r:-0}))
  done
  echo "$sum"
}

cpu_ticks() { # user + system clock ticks of all the contender's processes (threads included)
  local p sum=0 t
  for p in $(all_procs); do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    sum=$((sum + ${t:-0}))
  done
  echo "$sum"
}

# ---------------------------------------------------------------- results --
RES="$T/results.csv" # scenario,contender,W,conns,rps,p50,p99,errors,MBps,extra...
: >"$RES"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START_TS=$(date +%s)

cpu_cell() { # CT W: one wrk run of /cpu
  local n out
  n=$(cpu_n "$1")
  out=$(wrk_run 50 "/cpu?n=$n" "$T/out/cpu-$1-w$2.txt")
  echo "cpu,$1,$2,50,$out,$n" >>"$RES"
  note "cpu      $1 W=$2: $out (n=$n)"
}

if has "$SCENARIOS" cpu; then
  for w in 1 2 15; do
    for ct in "${CTS[@]}"; do
      start_contender "$ct" "$w"; start_nginx
      cpu_cell "$ct" "$w"
      stop_nginx; stop_contender
    done
  done
fi

if has "$SCENARIOS" io; then
  for w in 2 15; do
    for ct in "${CTS[@]}"; do
      start_contender "$ct" "$w"; start_nginx
      out=$(wrk_run 50 "/io?ms=5" "$T/out/io-$ct-w$w.txt")
      echo "io,$ct,$w,50,$out," >>"$RES"
      note "io       $ct W=$w: $out"
      stop_nginx; stop_contender
    done
  done
fi

# threads_cell SCENARIO PATH LABEL CT W [fcgi-host args...]: wrk -c64 on PATH after a 1 s warm-up,
# then the PSS of every process of the contender (their stacks and arenas touched by the run)
# and their CPU time per request (from /proc/PID/stat, before and after).
threads_cell() {
  local sc=$1 path=$2 label=$3 ct=$4 w=$5 c0 c1 pss reqs cpu_us file
  shift 5
  file="$T/out/$sc-${label// /_}.txt"
  start_contender "$ct" "$w" "$@"; start_nginx
  # One second of the same load first: every process has served (php-fpm's children compile
  # and warm up, threads are made) before the measured run.
  wrk -t1 -c64 -d1s "http://127.0.0.1:$NGX_PORT$path" >/dev/null 2>&1 || true
  c0=$(cpu_ticks)
  out=$(wrk_run 64 "$path" "$file")
  pss=$(pss_sum_kib)
  c1=$(cpu_ticks)
  reqs=$(awk '/requests in/ { print $1 }' "$file")
  cpu_us=$(awk -v d=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.0f", d / hz * 1e6 / n }')
  echo "$sc,$label,$w,64,$out,$pss,$cpu_us" >>"$RES"
  note "$(printf '%-8s' "$sc") $label: $out; PSS of all its processes $pss kB; CPU µs per request $cpu_us"
  stop_nginx; stop_contender
}

# threads_cells SCENARIO PATH: the cells of the threads scenario, for one handler.
threads_cells() {
  local sc=$1 path=$2 ct
  for ct in "${CTS[@]}"; do
    case $ct in
      fcgi-host)
        threads_cell "$sc" "$path" "fcgi-host 2×32" fcgi-host 2 --threads 32 "${SC_HOST_ARGS[@]}"
        threads_cell "$sc" "$path" "fcgi-host 4×16" fcgi-host 4 --threads 16 "${SC_HOST_ARGS[@]}"
        threads_cell "$sc" "$path" "fcgi-host 64×1" fcgi-host 64 "${SC_HOST_ARGS[@]}" ;;
      libfcgi) threads_cell "$sc" "$path" "libfcgi 64 processes" libfcgi 64 ;;
      php-fpm)
        [[ $sc == sqlite ]] && ((SQLITE_NO_PHP)) && continue
        threads_cell "$sc" "$path" "php-fpm 64 children" php-fpm 64 ;;
      plack) ;; # 64 Perl processes add nothing the two above do not show
    esac
  done
}

SC_HOST_ARGS=()
if has "$SCENARIOS" threads; then threads_cells threads "/io?ms=$WAIT_MS"; fi

if has "$SCENARIOS" sqlite; then
  # The same cells with the SQLite handler of each contender in place of the work one.
  HOST_APP=libbench_sqlite.so LIBFCGI_PROG=work-sqlite PHP_SCRIPT=work_sqlite.php
  SC_HOST_ARGS=(--env "BENCH_SQLITE_DB=$BENCH_SQLITE_DB" --env "BENCH_SQLITE_ROWS=$BENCH_SQLITE_ROWS")
  threads_cells sqlite /sqlite
  unset HOST_APP LIBFCGI_PROG PHP_SCRIPT
  SC_HOST_ARGS=()
fi

if has "$SCENARIOS" updown; then
  cat >"$T/upload.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
local f = io.open("$T/upload.bin", "rb")
wrk.body = f:read("*a")
f:close()
EOF
  # updown_cell LABEL WHAT PATH [fcgi-host args...]: one wrk run of uploads (1 MiB, -c8) or
  # downloads (10 MiB, -c4) at W = 2 by the contender LABEL starts with, with the workers' RSS
  # sampled and, from perf stat over the workers, their system calls and CPU time per MiB moved.
  updown_cell() {
    local label=$1 what=$2 path=$3 ct=${1%% *} pids perf="" per_mib="," file
    shift 3
    file="$T/out/$what-${label// /_}"
    start_contender "$ct" 2 "$@"; start_nginx
    read -r before _ < <(rss_sum_kib)
    peak=0
    # RSS sampled every 0.2 s while the load runs (bounded by the run's own length).
    (for ((i = 0; i < DURATION * 5 + 10; i++)); do rss_sum_kib; sleep 0.2; done) >"$file.rss" &
    sampler=$!
    PIDS+=("$sampler")
    pids=$(workers_of | paste -sd,)
    if have perf; then
      perf stat -x, -e raw_syscalls:sys_enter,task-clock -p "$pids" -o "$file.perf" -- sleep $((DURATION + 1)) 2>/dev/null &
      perf=$!
      PIDS+=("$perf")
    fi
    if [[ $what == upload ]]; then
      out=$(wrk_run 8 "$path" "$file.txt" "$T/upload.lua")
    else
      out=$(wrk_run 4 "$path" "$file.txt")
    fi
    if [[ -n $perf ]]; then
      wait "$perf" 2>/dev/null || true
      # MiB moved: completed requests x 1 (uploads) or x 10 (downloads).
      per_mib=$(awk -F, -v req="$(awk '/requests in/ { print $1 }' "$file.txt")" -v mib="$([[ $what == upload ]] && echo 1 || echo 10)" '
        $3 ~ /raw_syscalls/ { s = $1 } $3 ~ /task-clock/ { t = $1 }
        END { m = req * mib; if (m > 0 && s ~ /^[0-9.]+$/) printf "%.0f,%.2f", s / m, t / m; else printf "," }' "$file.perf" 2>/dev/null || echo ",")
    fi
    stop_pids 50 "$sampler" || true
    peak=$(awk '$1 > m { m = $1 } END { print m + 0 }' "$file.rss")
    read -r after _ < <(rss_sum_kib)
    echo "$what,$label,2,$([[ $what == upload ]] && echo 8 || echo 4),$out,$before $peak $after,$per_mib" >>"$RES"
    note "$what $label W=2: $out; RSS of the 2 workers (kB) before $before, peak $peak, after $after; syscalls and CPU ms per MiB: $per_mib"
    stop_nginx; stop_contender
  }
  for ct in "${CTS[@]}"; do
    updown_cell "$ct" upload /upload
    updown_cell "$ct" download "/download?mb=10"
  done
  if has "$CONTENDERS" fcgi-host; then
    updown_cell "fcgi-host streamed" upload /upload-stream
    updown_cell "fcgi-host send_file" download "/file?path=$T/static/10m.bin"
    updown_cell "fcgi-host X-Accel-Redirect" download "/file?path=$T/static/10m.bin" \
      --send-file-mode x-accel-redirect --x-accel-prefix /internal
    # One 100 MiB upload read as it arrives: the worker's RSS before and at its peak.
    head -c $((100 << 20)) /dev/zero | tr '\0' 'u' >"$T/upload100.bin"
    MAX_BODY=200m start_contender fcgi-host 1 --max-buffered 256m; start_nginx
    read -r before _ < <(rss_sum_kib)
    (for ((i = 0; i < 600; i++)); do rss_sum_kib; sleep 0.1; done) >"$T/out/rss-100m.txt" &
    sampler=$!
    PIDS+=("$sampler")
    got=$(curl -s --max-time 60 -H 'Content-Type: application/octet-stream' --data-binary "@$T/upload100.bin" \
      "http://127.0.0.1:$NGX_PORT/upload-stream" || true)
    stop_pids 50 "$sampler" || true
    peak=$(awk '$1 > m { m = $1 } END { print m + 0 }' "$T/out/rss-100m.txt")
    STREAM_100M="a 100 MiB upload read as it arrives (/upload-stream, W = 1): the handler counted ${got%%[[:space:]]*} bytes; the worker's RSS $before kB before, $peak kB at the peak (+$((peak - before)) kB)"
    note "$STREAM_100M"
    rm -f "$T/upload100.bin"
    stop_nginx; stop_contender
  fi
  # The ceiling: nginx sending the same 10 MiB from a file (any contender behind it).
  start_contender "${CTS[0]}" 1; start_nginx
  out=$(wrk_run 4 "/static/10m.bin" "$T/out/down-static.txt")
  echo "download,nginx static,-,4,$out,,," >>"$RES"
  note "download nginx static file: $out"
  stop_nginx; stop_contender
fi

# ---------------------------------------------------------------- overload --
# scripts/bench/open_loop.c: RATE requests a second whatever the answers, for DURATION seconds,
# each given up after 1 s (the client timeout). Why not h2load: see the comment in open_loop.c.
overload_cell() { # LABEL CT CAPACITY FACTOR [fcgi-host args...]
  local label=$1 ct=$2 cap=$3 f=$4 rate res
  shift 4
  rate=$(awk -v c="$cap" -v f="$f" 'BEGIN { printf "%.0f", c * f }')
  start_contender "$ct" 2 "$@"; start_nginx
  res=$(timeout $((DURATION + 30)) "$T/bin/open-loop" "$NGX_PORT" "/cpu?n=$(cpu_n "$ct")" "$rate" \
    "$DURATION" 1000 3500 2>>"$T/log/open-loop.log") || res="0,0,0,0,0,0,0,0,0,0"
  echo "overload,$label,2,$f,$cap,$rate,$res" >>"$T/overload.csv"
  note "overload $label ${f}x of $cap req/s ($rate/s offered): sent,ok,p50,p99,503,5xx,other,timeouts,conn errors,no conn = $res"
  stop_nginx; stop_contender
}

if has "$SCENARIOS" overload; then
  : >"$T/overload.csv"
  # Each contender's capacity is measured right before its overload cells (the machine's speed
  # drifts when it is shared), then 0.8x, 1.5x, 3x of it.
  for ct in "${CTS[@]}"; do
    start_contender "$ct" 2; start_nginx
    cap=$(wrk_run 50 "/cpu?n=$(cpu_n "$ct")" "$T/out/cap-$ct.txt" | cut -d, -f1)
    stop_nginx; stop_contender
    note "capacity $ct W=2: $cap req/s"
    for f in 0.8 1.5 3; do
      overload_cell "$ct" "$ct" "$cap" "$f"
      if [[ $ct == fcgi-host ]]; then
        overload_cell "fcgi-host+shed" fcgi-host "$cap" "$f" --max-queue-time "$MAX_QUEUE_MS"
      fi
    done
  done
fi

# ------------------------------------------------------------------ report --
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
ELAPSED=$(($(date +%s) - START_TS))
{
  echo "# fcgi-host: realistic workloads"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); load average $LOAD_BEFORE before, $LOAD_AFTER after (the machine is shared: compare within this run only)"
  echo "- command: \`$COMMAND_LINE\` ($((ELAPSED / 60)) min $((ELAPSED % 60)) s); fcgi-host commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- nginx 1 worker in front of each; wrk -t1 (-c as given) for ${DURATION}s per cell; overload with scripts/bench/open_loop.c"
  echo "- /cpu loop turns for ~${CPU_US} µs of CPU (calibrated at the start of this run): C and C++ $N_C${N_PHP:+, PHP $N_PHP}${N_PERL:+, Perl $N_PERL}"
  for sc in cpu io; do
    grep -q "^$sc," "$RES" || continue
    echo
    [[ $sc == cpu ]] && echo "## CPU-bound handler (~${CPU_US} µs per request), wrk -c50" || echo "## I/O-wait handler (sleeps 5 ms), wrk -c50"
    echo
    echo "| W | contender | req/s | p50 ms | p99 ms | errors | ÷ fcgi-host |"
    echo "|---:|---|---:|---:|---:|---:|---:|"
    awk -F, -v sc="$sc" '$1 == sc { k = $3; if ($2 == "fcgi-host") h[k] = $5; row[++n] = $0 }
      END { for (i = 1; i <= n; i++) { split(row[i], f, ",")
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", f[3], f[2], f[5], f[6], f[7], f[8],
          (h[f[3]] > 0 ? sprintf("%.2f", f[5] / h[f[3]]) : "–") } }' "$RES"
  done
  for sc in threads sqlite; do
    grep -q "^$sc," "$RES" || continue
    echo
    if [[ $sc == threads ]]; then
      echo "## Waiting handlers: ${WAIT_MS} ms per request (as on a database), 64 clients"
      echo
      echo "wrk -t1 -c64 on /io?ms=$WAIT_MS through nginx; 64 requests in flight at most, so $((64 * 1000 / WAIT_MS)) req/s is the ceiling. fcgi-host W×T = \`--workers W --threads T\`. PSS: the sum over all the contender's processes (master included) from /proc/PID/smaps_rollup, read at the end of the run; CPU: user + system time of those processes over the run, per request (nginx and wrk not included)."
    else
      echo "## A small SQLite query per request, one connection per thread, 64 clients"
      echo
      echo "wrk -t1 -c64 on /sqlite through nginx: \`SELECT name, value FROM items WHERE k = ?\` with a random k, on a file of $SQLITE_ROWS rows under a unique index on k (in the page cache: the query is CPU, no wait). One connection and prepared statement per handler thread (fcgi-host: each thread's handler instance opens its own in \`on_thread_start()\`, scripts/bench/sqlite_plugin.cpp), per process (the libfcgi loop, scripts/bench/work_sqlite.c) or per child (php-fpm: a persistent PDO connection, scripts/bench/work_sqlite.php); each connection keeps its own page cache, the whole file once warm. fcgi-host W×T = \`--workers W --threads T\`. PSS: the sum over all the contender's processes (master included) from /proc/PID/smaps_rollup, read at the end of the run; CPU: user + system time of those processes over the run, per request (nginx and wrk not included)."
    fi
    echo
    echo "| contender | workers | req/s | p50 ms | p99 ms | errors | PSS MB | CPU µs / request | req/s ÷ fcgi-host 4×16 | PSS ÷ fcgi-host 4×16 |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk -F, -v sc="$sc" '$1 == sc { if ($2 == "fcgi-host 4×16") { hr = $5; hp = $10 } row[++n] = $0 }
      END { for (i = 1; i <= n; i++) { split(row[i], f, ",")
        printf "| %s | %s | %s | %s | %s | %s | %.1f | %s | %s | %s |\n", f[2], f[3], f[5], f[6], f[7], f[8], f[10] / 1024,
          (f[11] == "" ? "–" : f[11]), (hr > 0 ? sprintf("%.2f", f[5] / hr) : "–"), (hp > 0 ? sprintf("%.2f", f[10] / hp) : "–") } }' "$RES"
  done
  if grep -q "^upload,\|^download," "$RES"; then
    echo
    echo "## Uploads (1 MiB POST, wrk -c8) and downloads (10 MiB, wrk -c4), W = 2"
    echo
    echo "| transfer | contender | req/s | MB/s | p99 ms | errors | syscalls / MiB | worker CPU ms / MiB | RSS of the workers kB: before / peak / after |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
    awk -F, '$1 == "upload" || $1 == "download" { split($10, r, " ")
      mbs = ($1 == "upload" ? $5 * 1.048576 : $9 * 1.048576)
      printf "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s |\n", $1, $2, $5, mbs, $7, $8,
        ($11 == "" ? "–" : $11), ($12 == "" ? "–" : $12), ($10 == "" ? "–" : r[1] " / " r[2] " / " r[3]) }' "$RES"
    echo
    echo "MB/s: uploads = req/s × 1 MiB; downloads = wrk's Transfer/sec (10^6 bytes per MB). Syscalls and CPU: \`perf stat -e raw_syscalls:sys_enter,task-clock\` over the workers during the run, per MiB moved. \"fcgi-host streamed\": the handler reads the body as it arrives (\`Request::body_reader()\`); \"send_file\": \`Response::send_file()\` of the 10 MiB file, streamed by the host, or handed to nginx (\`--send-file-mode x-accel-redirect\`)."
    echo
    awk -F, '$1 == "upload" || $1 == "download" { m[$1 "|" $2] = ($1 == "upload" ? $5 : $9) }
      END {
        n = split("upload|fcgi-host;upload|fcgi-host streamed;download|fcgi-host;download|fcgi-host send_file;download|fcgi-host X-Accel-Redirect", rows, ";")
        split("plack libfcgi php-fpm", others, " ")
        print "Ratios in this run (MB/s):"
        print ""
        for (i = 1; i <= n; i++) {
          k = rows[i]; if (!(k in m) || m[k] == 0) continue
          split(k, p, "|"); line = "- " p[1] " " p[2] ":"
          for (j = 1; j <= 3; j++) { o = p[1] "|" others[j]; if ((o in m) && m[o] > 0) line = line sprintf(" %.2f× %s,", m[k] / m[o], others[j]) }
          if (p[1] == "download" && m["download|nginx static"] > 0) line = line sprintf(" %.2f× nginx serving the file,", m[k] / m["download|nginx static"])
          sub(/,$/, "", line); print line
        } }' "$RES"
    [[ -n ${STREAM_100M:-} ]] && { echo; echo "Streamed: $STREAM_100M."; }
  fi
  if [[ -s $T/overload.csv ]]; then
    echo
    echo "## Overload: open-loop arrivals, W = 2, the CPU-bound handler, 1 s client timeout"
    echo
    echo "Capacity = req/s of /cpu at W = 2 (wrk -c50), measured for each contender right before its cells; fcgi-host+shed = \`--max-queue-time $MAX_QUEUE_MS\`."
    echo
    echo "| contender | offered | capacity req/s | offered req/s | goodput req/s | goodput ÷ capacity | p50 ms | p99 ms (answered in time) | 503 | other 5xx | no answer within 1 s | connection errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk -F, -v d="$DURATION" '{ good = $8 / d
      printf "| %s | %s× | %s | %s | %.0f | %.2f | %s | %s | %s | %s | %s | %s |\n", $2, $4, $5, $6, good,
        ($5 > 0 ? good / $5 : 0), $9, $10, $11, $12, $14, $15 + $16 }' "$T/overload.csv"
  fi
  if [[ -s $T/log/nginx-error.log ]]; then
    echo
    echo "nginx error log: $(wc -l <"$T/log/nginx-error.log") lines; by kind:"
    echo
    echo '```'
    sed -E 's/^[0-9\/: ]+\[[a-z]+\] [0-9#]+: \*[0-9]+ //; s/, client:.*//; s/unix:[^ ]*/unix:SOCK/; s/[0-9]+: //' "$T/log/nginx-error.log" |
      sort | uniq -c | sort -rn | head -8
    echo '```'
  fi
} >"$T/report.md"
cat "$T/report.md"
# A hand-written part of the page (analysis measured otherwise) follows a marker line and is kept.
KEEP_MARK='<!-- kept by scripts/bench-workloads.sh: the part below is not generated -->'
if [[ -n $OUT && -f $OUT ]] && grep -qF "$KEEP_MARK" "$OUT"; then
  { echo; awk -v m="$KEEP_MARK" 'index($0, m) == 1 { on = 1 } on' "$OUT"; } >>"$T/report.md"
fi
if [[ -n $OUT ]]; then cp "$T/report.md" "$OUT"; note "wrote $OUT"; fi
if [[ -n $OUT ]]; then
  cp "$RES" "${OUT%.md}.csv"
  [[ -s $T/overload.csv ]] && cp "$T/overload.csv" "${OUT%.md}-overload.csv"
fi

if [[ -n $CHART && -s $T/overload.csv ]] && have gnuplot; then
  # Goodput vs offered load (both as multiples of each contender's capacity), one line each.
  awk -F, -v d="$DURATION" '{ print $2, $4, ($5 > 0 ? $8 / d / $5 : 0) }' "$T/overload.csv" >"$T/chart.dat"
  labels=$(cut -d' ' -f1 "$T/chart.dat" | awk '!seen[$0]++' | tr '\n' ' ')
  plot=""
  for l in $labels; do plot+="\"< grep '^$l ' $T/chart.dat\" using 2:3 with linespoints lw 2 title \"$l\", "; done
  gnuplot <<EOF 2>>"$T/log/gnuplot.log" && note "wrote $CHART" || note "gnuplot failed"
set terminal pngcairo size 900,560 font ",11"
set output "$CHART"
set title "Goodput under open-loop overload (CPU-bound handler, W=2, 1 s client timeout, $(date +%Y-%m-%d))"
set xlabel "offered load (x capacity)"
set ylabel "goodput (x capacity): answers within 1 s"
set yrange [0:1.6]
set xrange [0.5:3.3]
set grid
set key top left
plot ${plot%, }, x with lines dt 2 lc "gray" title "offered", 1 with lines dt 3 lc "black" title "capacity"
EOF
fi

if [[ -n $CHART ]] && grep -q '^threads,' "$RES" && have gnuplot; then
  # The threads scenario: req/s and the PSS of all the processes, one bar per contender.
  THREADS_CHART="$(dirname "$CHART")/bench-workloads-threads.png"
  awk -F, '$1 == "threads" { printf "\"%s\" %s %.1f\n", $2, $5, $10 / 1024 }' "$RES" >"$T/threads.dat"
  gnuplot <<EOF 2>>"$T/log/gnuplot.log" && note "wrote $THREADS_CHART" || note "gnuplot failed"
set terminal pngcairo size 900,440 font ",10"
set bmargin 7
set rmargin 12
set output "$THREADS_CHART"
set multiplot layout 1,2 title "A handler that waits ${WAIT_MS} ms, 64 clients through nginx ($(date +%Y-%m-%d), 2 shared cores)"
set style fill solid 0.7 border -1
set boxwidth 0.6
set xtics rotate by -30 nomirror
set grid ytics
unset key
set yrange [0:*]
set title "requests per second (higher is better)"
plot "$T/threads.dat" using 0:2:xtic(1) with boxes lc rgb "#3465a4"
set title "PSS of all its processes, MB (lower is better)"
plot "$T/threads.dat" using 0:3:xtic(1) with boxes lc rgb "#cc0000"
unset multiplot
EOF
fi
