#!/usr/bin/env bash
# scripts/bench-hol.sh — head-of-line blocking beside slow requests, behind one private nginx.
#
# W workers serve F wrk connections of fast requests while S other connections keep S slow
# requests of D ms in flight; nginx talks to the app without keep-alive (one connection per
# request) and with it (keepalive 32, fastcgi_keep_conn on). A kept connection parked at a
# worker busy in a slow request makes the fast requests nginx sends on it wait: that is the
# head-of-line blocking this measures (fast p50/p99/max and req/s), beside the same cell
# without slow requests.
#
# Contenders, each with the same slow request (sleep D ms) and fast answer ("OK"):
#   fcgi-host          the echo app (?delay_ms=D), kept connections move (--handoff-after 2 ms)
#   fcgi-host-pinned   the same with --handoff-after 0: a kept connection stays with its worker
#   baseline           the bare libfcgi loop (scripts/bench/libfcgi_sleepy.c) under spawn-fcgi
#   php-fpm            php-fpm 8.2, pm=static, usleep(D ms) (skipped when not installed)
#
# Usage: scripts/bench-hol.sh [--cells "W:S:D ..."] [--fast F] [--seconds N]
#                             [--contenders "LIST"] [--out FILE]
#   --cells      W:S:D triples (default "4:2:200 8:2:50")
#   --fast       fast wrk connections (default 40)
#   --seconds    length of each run (default 5)
#   --out        also write the Markdown table here
# Builds build-bench/ (Release) when missing. Needs nginx, wrk, spawn-fcgi, libfcgi-dev
# (scripts/test.sh installs them; php8.2-fpm is optional). Every process it starts is tracked
# by pid and stopped on exit; traffic goes to 127.0.0.1 and Unix sockets only.
set -euo pipefail
cd "$(dirname "$0")/.."

CELLS="4:2:200 8:2:50"
FAST=40
SECONDS_PER_RUN=5
CONTENDERS="fcgi-host fcgi-host-pinned baseline php-fpm"
OUT=""
while (($#)); do
  case $1 in
  --cells) CELLS=$2; shift 2 ;;
  --fast) FAST=$2; shift 2 ;;
  --seconds) SECONDS_PER_RUN=$2; shift 2 ;;
  --contenders) CONTENDERS=$2; shift 2 ;;
  --out) OUT=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-hol.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# shellcheck source=bench/lib.sh
. scripts/bench/lib.sh # die, have, stop_pids, launch_nginx, stop_nginx, nginx_temp_paths
for tool in nginx wrk spawn-fcgi cc; do have $tool || die "$tool is missing"; done
PHP_FPM=/usr/sbin/php-fpm8.2
if [[ $CONTENDERS == *php-fpm* && ! -x $PHP_FPM ]]; then
  echo "note: php-fpm 8.2 is not installed (apt-get install php8.2-fpm): skipping it"
  CONTENDERS=${CONTENDERS/php-fpm/}
fi

if [[ ! -x build-bench/fcgi_host/fcgi-host ]]; then
  cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DFCGI_HOST_TESTS=OFF >/dev/null
  cmake --build build-bench -j"$(nproc)" --target fcgi-host >/dev/null
fi
HOST_BIN=$PWD/build-bench/fcgi_host/fcgi-host

T=$(mktemp -d /tmp/fcgi-host-hol-XXXXXX)
chmod 755 "$T"
PIDS=()
cleanup() {
  ((${#PIDS[@]})) && { stop_pids 30 "${PIDS[@]}" || true; }
  rm -rf "$T"
}
trap cleanup EXIT
cc -O2 -o "$T/libfcgi_sleepy" scripts/bench/libfcgi_sleepy.c -lfcgi || die "cannot build the baseline"
cat >"$T/slow.php" <<'PHP'
<?php
if (isset($_GET['delay_ms'])) usleep((int)$_GET['delay_ms'] * 1000);
header('Content-Type: text/plain');
echo 'OK';
PHP

SOCK=$T/app.sock
PORT=$((20000 + RANDOM % 20000))
APP_PIDS=()

start_app() { # CONTENDER W
  rm -f "$SOCK"
  APP_PIDS=()
  case $1 in
  fcgi-host | fcgi-host-pinned)
    local after=0.002
    [[ $1 == fcgi-host-pinned ]] && after=0
    "$HOST_BIN" --listen "unix:$SOCK" --socket-mode 0666 --app echo --workers "$2" \
      --handoff-after "$after" 2>>"$T/app.log" &
    APP_PIDS=($!)
    ;;
  baseline)
    spawn-fcgi -F "$2" -s "$SOCK" -M 0666 -P "$T/spawn.pid" -- "$T/libfcgi_sleepy" >>"$T/app.log" 2>&1
    mapfile -t APP_PIDS < <(tr -s ' \n' '\n' <"$T/spawn.pid" | grep -E '^[0-9]+$')
    ;;
  php-fpm)
    cat >"$T/fpm.conf" <<FPM
[global]
pid = $T/fpm.pid
error_log = $T/fpm.log
daemonize = no
[hol]
user = root
group = root
listen = $SOCK
listen.mode = 0666
listen.backlog = 1024
pm = static
pm.max_children = $2
FPM
    "$PHP_FPM" -F -R -y "$T/fpm.conf" -d opcache.enable=1 >>"$T/app.log" 2>&1 &
    APP_PIDS=($!)
    ;;
  esac
  PIDS+=("${APP_PIDS[@]}")
  local i
  for ((i = 0; i < 100; i++)); do [[ -S $SOCK ]] && return 0; sleep 0.05; done
  die "$1 did not listen on $SOCK: $(tail -3 "$T/app.log")"
}

stop_app() {
  local p
  for p in "${APP_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${APP_PIDS[@]}"; do
    # spawn-fcgi's children are not ours to wait for: poll until they are gone.
    for ((i = 0; i < 100; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  done
}

start_nginx() { # keepalive(0|1) contender
  local upstream="server unix:$SOCK;" keep="" script=""
  if [[ $1 == 1 ]]; then upstream="$upstream keepalive 32;"; keep="fastcgi_keep_conn on;"; fi
  [[ $2 == php-fpm ]] && script="fastcgi_param SCRIPT_FILENAME $T/slow.php;"
  cat >"$T/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
user root;
error_log $T/nginx-error.log;
pid $T/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
$(nginx_temp_paths "$T")
  upstream app { $upstream }
  server {
    listen 127.0.0.1:$PORT;
    keepalive_requests 1000000;
    location / {
      fastcgi_pass app; $keep
      include /etc/nginx/fastcgi_params;
      $script
    }
  }
}
NGINX
  launch_nginx "$T/nginx.conf" "$T/nginx-error.log" "$T/nginx.out"
  local i
  for ((i = 0; i < 100; i++)); do
    [[ $(curl -s -m 2 "http://127.0.0.1:$PORT/echo?ready=1" 2>/dev/null) == *OK* || \
       $(curl -s -m 2 "http://127.0.0.1:$PORT/echo?ready=1" 2>/dev/null) == *ready* ]] && return 0
    sleep 0.05
  done
  die "no answer through nginx: $(tail -3 "$T/nginx-error.log")"
}

# run S D: the fast wrk beside S slow connections (S=0: alone). Prints "p50 p99 max rps errors".
run() {
  local s=$1 d=$2 slow_pid=""
  if ((s > 0)); then
    wrk -t1 -c"$s" -d"$((SECONDS_PER_RUN + 1))s" --timeout 10s \
      "http://127.0.0.1:$PORT/echo?delay_ms=$d" >"$T/slow.txt" 2>&1 &
    slow_pid=$!
    sleep 0.5 # the slow requests are in flight before the fast ones start
  fi
  wrk -t1 -c"$FAST" -d"${SECONDS_PER_RUN}s" --timeout 5s --latency \
    "http://127.0.0.1:$PORT/echo?fast=1" >"$T/fast.txt" 2>&1
  [[ -n $slow_pid ]] && wait "$slow_pid"
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /^ +50%/ { p50 = ms($2) } /^ +99%/ { p99 = ms($2) }
    /Latency/ && !max { max = ms($4) }
    /Requests\/sec/ { rps = $2 }
    /Socket errors/ { err += $4 + $6 + $8 + $10 } /Non-2xx/ { err += $5 }
    END { printf "%.2f %.2f %.1f %.0f %d\n", p50, p99, max, rps, err }' "$T/fast.txt"
}

echo "# head-of-line: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -r), fast wrk -c$FAST, ${SECONDS_PER_RUN} s per run"
table="| W | S × D | contender | mode | fast p50 alone | fast p99 alone | fast p50 beside slow | fast p99 beside slow | fast max | p99 ratio | fast req/s | errors |"
table+=$'\n'"|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for cell in $CELLS; do
  IFS=: read -r W S D <<<"$cell"
  for contender in $CONTENDERS; do
    for keep in 0 1; do
      mode=close; ((keep)) && mode=keep-alive
      start_app "$contender" "$W"
      start_nginx "$keep" "$contender"
      read -r a50 a99 _ _ _ < <(run 0 "$D")
      read -r b50 b99 bmax brps berr < <(run "$S" "$D")
      stop_nginx
      stop_app
      ratio=$(awk -v a="$a99" -v b="$b99" 'BEGIN { printf "%.1f", (a > 0 ? b / a : 0) }')
      row="| $W | $S × $D ms | $contender | $mode | $a50 | $a99 | $b50 | $b99 | $bmax | ${ratio}× | $brps | $berr |"
      echo "$row"
      table+=$'\n'"$row"
    done
  done
done
if [[ -n $OUT ]]; then
  { echo "Head-of-line run of $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores ($(uname -r)); latencies in ms."; echo; echo "$table"; } >"$OUT"
fi
