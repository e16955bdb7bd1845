#!/usr/bin/env bash
# scripts/bench-front.sh — req/s of the hello app through nginx and through each other FastCGI
# front server Debian packages (Apache in both its forms, lighttpd, Caddy, h2o, HAProxy), each
# running the snippet shipped in conf/ in its own reuse mode and the other one, over a Unix socket
# and over TCP: 10 clients x 300 GETs, a new client connection per request, `--workers 2`.
# docs/front-servers.md shows its figures. A measurement, not a test: the test suite checks the
# same servers for correctness (tests/integration/test_front_servers.cpp) and never times them.
#
# Usage: scripts/bench-front.sh [--build-dir DIR] [--runs N]
#   --build-dir  CMake build directory, Release, made when missing (default build-front/)
#   --runs       how many times to measure every row (default 3; 3000 requests take under a
#                second, so a single run swings a lot)
# Needs what scripts/test.sh installs (the servers left out are named). The servers, the host and
# nginx are the integration tests' harness (scripts/bench/front_rates.cpp): each process is
# tracked by pid and stopped, traffic goes to loopback and Unix sockets only.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=build-front
RUNS=3
while (($#)); do
  case $1 in
  --build-dir) BUILD_DIR=$2; shift 2 ;;
  --runs) RUNS=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-front.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "bench-front.sh: --runs wants a count" >&2; exit 2; }

[[ -f $BUILD_DIR/CMakeCache.txt ]] || cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target fcgi-host front_rates >/dev/null

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
  "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for ((run = 1; run <= RUNS; run++)); do
  echo "# run $run of $RUNS"
  FCGI_HOST_BINARY=$PWD/$BUILD_DIR/fcgi_host/fcgi-host "$BUILD_DIR/tests/front_rates" --no-intro=true |
    grep -E 'req/s|left out'
done
