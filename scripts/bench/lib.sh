# Shell helpers shared by scripts/bench.sh, bench-workloads.sh and bench-hol.sh (sourced, not run).
# Processes are only ever looked up by pid: other runs on the same machine start the same
# programs, so nothing here matches processes by name. A script keeps the pids it started in the
# array PIDS (stop_pids drops the ones it stops), and nginx's in NGX_PID.

# Messages are named after the script that sourced this file.
BENCH_NAME=${BENCH_NAME:-$(basename "$0")}
die() { echo "$BENCH_NAME: $*" >&2; exit 1; }
note() { echo "$BENCH_NAME: $*" >&2; }
# need_arg "$@" in an option loop: the option in $1 has its value in $2.
need_arg() { [[ $# -ge 2 ]] || die "$1 needs a value (see --help)"; }
have() { command -v "$1" >/dev/null 2>&1; }
# After the option loop: positive_ints OPTION VALUE... and words_among OPTION "ALLOWED" WORD...
# die naming the option unless every value is a positive integer, or one of ALLOWED.
positive_ints() {
  local option=$1 v
  shift
  for v in "$@"; do [[ $v =~ ^[1-9][0-9]*$ ]] || die "$option: positive integers (got '$v')"; done
}
words_among() {
  local option=$1 allowed=" $2 " w
  shift 2
  for w in "$@"; do [[ $allowed == *" $w "* ]] || die "$option: among$allowed(got '$w')"; done
}

# alive PID: a zombie (an exited but unreaped child) counts as dead.
alive() {
  local s
  s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}

# children_of PID: its child pids, one a line, from /proc.
children_of() {
  cat /proc/"$1"/task/*/children 2>/dev/null | tr -s ' ' '\n' | grep -E '^[0-9]+$' || true
}

# free_port: a random 127.0.0.1 port with no socket in any state on it.
free_port() {
  local p i
  for ((i = 0; i < 200; i++)); do
    p=$((20000 + RANDOM % 30000))
    if [[ -z $(ss -Htan "sport = :$p") ]]; then
      echo "$p"
      return 0
    fi
  done
  echo "no free TCP port found" >&2
  return 1
}

# nginx_temp_paths DIR: the http-block lines that keep a private nginx's temp files in DIR.
nginx_temp_paths() {
  local k
  for k in client_body proxy fastcgi uwsgi scgi; do
    printf '    %s_temp_path %s/%s;\n' "$k" "$1" "$k"
  done
}

# stop_pids TENTHS PID...: SIGTERM to each, up to TENTHS/10 s of grace for them and for their
# children (the workers of a master), then SIGKILL to what is left. Reaps our own children and
# drops the pids from PIDS. Returns 1 if something needed the SIGKILL.
stop_pids() {
  local tenths=$1 p q i left killed=0
  shift
  [[ $# -gt 0 ]] || return 0
  local all=("$@")
  for p in "$@"; do mapfile -t -O "${#all[@]}" all < <(children_of "$p"); done
  kill -TERM "$@" 2>/dev/null || true
  for ((i = 0; i < tenths; i++)); do
    left=0
    for p in "${all[@]}"; do alive "$p" && left=1; done
    ((left)) || break
    sleep 0.1
  done
  for p in "${all[@]}"; do
    if alive "$p"; then kill -KILL "$p" 2>/dev/null || true; killed=1; fi
  done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
  local keep=()
  for q in "${PIDS[@]}"; do
    for p in "$@"; do [[ $q == "$p" ]] && continue 2; done
    keep+=("$q")
  done
  PIDS=("${keep[@]}")
  return $((killed == 0 ? 0 : 1))
}

# launch_nginx CONF ERROR_LOG OUTPUT: a private nginx (its prefix the config's directory) in the
# background; NGX_PID and PIDS get its pid.
launch_nginx() {
  nginx -p "$(dirname "$1")" -e "$2" -c "$1" >>"$3" 2>&1 &
  NGX_PID=$!
  PIDS+=("$NGX_PID")
}

# nginx_answers PORT PATH TRIES: true once a request through nginx gets a body holding "OK"
# (the contender behind it is up, not only a socket), one try every 0.1 s.
nginx_answers() {
  local i body=""
  for ((i = 0; i < $3; i++)); do
    body=$(curl -fsS -m 2 "http://127.0.0.1:$1$2" 2>/dev/null || true)
    [[ $body == *OK* ]] && return 0
    sleep 0.1
  done
  return 1
}

# stop_nginx: stops the nginx of launch_nginx (5 s of grace); NGX_KILLED=1 if it needed SIGKILL.
stop_nginx() {
  NGX_KILLED=0
  [[ -n ${NGX_PID:-} ]] || return 0
  stop_pids 50 "$NGX_PID" || NGX_KILLED=1
  NGX_PID=""
}

# ---- Used by the benchmark scripts with these globals: PIDS (the pids started and not yet
# stopped), T (the run's temp dir, with bin/ and log/), REPO, BUILD_DIR, REBUILD, SMOKE, KEEP_TMP.

# install_packages: the Debian packages in the arrays `missing` (required) and `optional`:
# installed with INSTALL=1; otherwise a missing required one stops the run, naming them all.
install_packages() {
  ((${#missing[@]} + ${#optional[@]})) || return 0
  if ((INSTALL)); then
    note "installing: ${missing[*]} ${optional[*]}"
    apt-get install -y "${missing[@]}" "${optional[@]}" >&2
  elif ((${#missing[@]})); then
    die "missing Debian packages: ${missing[*]} (run with --install, or apt-get install -y ${missing[*]})"
  fi
}

cleanup() {
  trap - EXIT INT TERM
  local orphans=() p q
  # The workers of a master we started, looked up now by pid: if a master
  # needs SIGKILL, its workers must not outlive it.
  for p in "${PIDS[@]}"; do
    for q in $(children_of "$p"); do orphans+=("$q"); done
  done
  if ((${#PIDS[@]})); then stop_pids 30 "${PIDS[@]}" || true; fi
  for p in "${orphans[@]}"; do alive "$p" && kill -KILL "$p" 2>/dev/null; done
  if ((KEEP_TMP)); then note "temp dir kept: $T"; else rm -rf "$T"; fi
}

# unix_listening PATH: a socket is at PATH and listening. fcgi-host binds its socket at PATH
# in a directory nobody else writes; in a shared one (a sticky /tmp) as DIR/.NAME-XXXXXX/s,
# renamed to PATH, so ss shows that first name: both are looked for.
unix_listening() {
  [[ -S $1 ]] || return 1
  ss -Hlx | awk -v p="$1" -v d="$(dirname "$1")/.$(basename "$1")-" '
    { for (i = 1; i <= NF; i++) if ($i == p || (index($i, d) == 1 && $i ~ /\/s$/)) f = 1 }
    END { exit !f }'
}

# wait_listening ADDR: ADDR is unix:/path or 127.0.0.1:PORT. Bounded: 10 s.
wait_listening() {
  local addr=$1 i
  for ((i = 0; i < 200; i++)); do
    if [[ $addr == unix:* ]]; then
      unix_listening "${addr#unix:}" && return 0
    else
      [[ -n $(ss -Hltn "sport = :${addr##*:}") ]] && return 0
    fi
    sleep 0.05
  done
  return 1
}

# ------------------------------------------------------------------ build --
build_host() {
  local cache="$BUILD_DIR/CMakeCache.txt" type
  if [[ -f $cache ]]; then
    type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$cache")
    # A Debug or sanitizer build would make every ratio meaningless; rather
    # than reconfigure someone's build directory, use a private one. A smoke
    # run measures nothing, so it takes any build.
    if ((!SMOKE)) && { [[ $type != Release ]] || grep -q '^FCGI_HOST_SANITIZE:BOOL=ON' "$cache"; }; then
      note "$BUILD_DIR is a '$type' build (or sanitized); using $REPO/build-bench (Release) instead"
      BUILD_DIR="$REPO/build-bench"
      cache="$BUILD_DIR/CMakeCache.txt"
    fi
  fi
  HOST_BUILT="$BUILD_DIR/fcgi_host/fcgi-host"
  if [[ ! -x $HOST_BUILT || $REBUILD -eq 1 ]]; then
    if [[ ! -f $cache ]]; then
      note "configuring $BUILD_DIR (Release)"
      cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DFCGI_HOST_TESTS=OFF >"$T/log/build.log" 2>&1 ||
        { tail -20 "$T/log/build.log" >&2; die "cmake configure failed"; }
    fi
    note "building fcgi-host in $BUILD_DIR"
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target fcgi-host >>"$T/log/build.log" 2>&1 ||
      { tail -30 "$T/log/build.log" >&2; die "building fcgi-host failed"; }
  fi
  # Others rebuild in the same tree: a private copy keeps the binary fixed for
  # the whole run.
  cp "$HOST_BUILT" "$T/bin/fcgi-host"
  HOST_BIN="$T/bin/fcgi-host"
}

# Copies a C fixture of scripts/bench into the run's bin dir: the CMake target
# (add_subdirectory(scripts/bench)) if it is newer than its source, else a
# direct cc -O2 build, the same program with the flags that matter.
# Usage: build_fixture NAME SOURCE [cc flags...]; prints the binary's path.
build_fixture() {
  local name=$1 src="$REPO/scripts/bench/$2" built="$BUILD_DIR/scripts/bench/$1"
  shift 2
  if [[ -x $built && $built -nt $src ]]; then
    cp "$built" "$T/bin/$name"
  else
    cc -O2 -o "$T/bin/$name" "$src" "$@" || die "compiling $src failed"
  fi
  echo "$T/bin/$name"
}
