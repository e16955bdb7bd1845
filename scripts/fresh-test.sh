#!/usr/bin/env bash
# The README on a machine that has nothing: a bare Debian 12 (debootstrap --variant=minbase
# bookworm, from Debian's mirror), imported into podman, where the README's commands run in the
# README's order, as root, on a checkout in /root (where root clones), as a newcomer runs them:
#   1. scripts/demo.sh must serve "OK" on 127.0.0.1:8080 (then it is stopped);
#   2. scripts/test.sh's install (scripts/test.sh --install-only) and its build, configured as
#      test.sh configures it, of the targets fcgi-host and unit_tests;
#   3. a small part of the suite: ctest -L unit (the unit cases and the source checks).
# With --full, step 2 and 3 are the whole of scripts/test.sh instead (a long run; what cannot run
# in a container says SKIPPED there).
#
# The image (localhost/fcgi-host-fresh:bookworm, ~120 MB; debootstrap takes 35 s to 2 min) is
# kept and reused by the next run; --new-image builds it again. The container has a network of
# its own (podman's default: apt reaches Debian's mirror through it, and the demo's
# 127.0.0.1:8080 is the container's, whatever listens on the machine's). Everything else it
# makes (the container, the copy of the tree, the logs) goes at the end.
#
# Prints "fresh-test: SKIPPED: why" and exits 0 where it cannot run (no podman, not root, no
# debootstrap, Debian's mirror unreachable): never "passed" then. Exits 1 on a failure, with the
# failing step's log.
#
# Usage: scripts/fresh-test.sh [--ref REF] [--full] [--new-image]
#   --ref REF    the tree of this git commit (e.g. main), instead of the working tree's files
#   --full       run the whole scripts/test.sh after the demo
#   --new-image  debootstrap and import the image again
# Environment: FRESH_TEST_MIRROR (default: the Debian mirror this machine's apt uses, from
# /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list).
set -euo pipefail
cd "$(dirname "$0")/.."

ref=
full=0
new_image=0
while (($#)); do
  case $1 in
  --ref) ref=$2; shift ;;
  --full) full=1 ;;
  --new-image) new_image=1 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fresh-test: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "fresh-test: $*"; }
skip() {
  say "SKIPPED: $*"
  exit 0
}
# The mirror apt uses here: the first Debian archive (not its security suite) in the sources.
apt_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] && awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' "$f"
  done
  if [[ -r /etc/apt/sources.list ]]; then
    awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' /etc/apt/sources.list
  fi
  return 0
}
mirror=${FRESH_TEST_MIRROR:-$(apt_mirror | head -n 1)}
[[ -n $mirror ]] || skip "no Debian mirror in this machine's apt sources (set FRESH_TEST_MIRROR)"
image=localhost/fcgi-host-fresh:bookworm

((EUID == 0)) || skip "needs root (debootstrap, rootful podman)"
mirror_host=${mirror#*://}
mirror_host=${mirror_host%%/*}
timeout 10 bash -c "exec 3<>/dev/tcp/$mirror_host/80" 2>/dev/null ||
  skip "Debian's mirror ($mirror_host:80) is not reachable: no network for apt"
# podman and debootstrap: the group containers of scripts/debian-packages.txt.
source scripts/debian-packages.sh
command -v apt-get >/dev/null && install_debian_packages containers >/dev/null
command -v podman >/dev/null || skip "podman is not installed (scripts/debian-packages.sh containers)"

work=$(mktemp -d "${TMPDIR:-/tmp}/fcgi-host-fresh-test.XXXXXX")
container=fcgi-host-fresh-$$
source scripts/podman-conf.sh
use_private_podman_conf "$work"
cleanup() {
  set +e
  podman rm -f "$container" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
podman info >"$work/info.log" 2>&1 || skip "podman info fails: $(grep -m1 -i error "$work/info.log")"
started=$SECONDS

if ((new_image)) || ! podman image exists "$image"; then
  command -v debootstrap >/dev/null || skip "debootstrap is not installed (scripts/debian-packages.sh containers)"
  say "debootstrap --variant=minbase bookworm ($mirror)"
  if ! debootstrap --variant=minbase bookworm "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -20 "$work/debootstrap.log"
    say "FAILED: debootstrap (above)"
    exit 1
  fi
  # Nothing of the machine's apt cache in the image.
  rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
  tar -C "$work/root" --numeric-owner -c . | podman import - "$image" >/dev/null
  rm -rf "$work/root"
  say "imported $image after $((SECONDS - started)) s"
else
  say "reusing $image (--new-image builds it again)"
fi

# The checkout: the working tree's files (a clone's), or a commit's tree.
mkdir "$work/src"
if [[ -n $ref ]]; then
  git archive --format=tar "$ref" | tar -x -C "$work/src"
  say "the tree of $ref ($(git rev-parse --short "$ref"))"
else
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
    tar --null -T - -c | tar -x -C "$work/src"
  say "the working tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ', with changes'))"
fi

# What runs inside: the README's commands, each step's output in its own log under /logs.
cat >"$work/steps.sh" <<'STEPS'
set -uo pipefail
cd /root/fcgi-host
step() { echo "fresh-test: $*"; }
# 1. The first command; its answer is read with bash alone (curl is what demo.sh installs).
scripts/demo.sh >/logs/demo.log 2>&1 &
demo=$!
answer=
for _ in $(seq 1800); do # the install and the build come first: at most 30 minutes
  if answer=$(timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8080 &&
      printf "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n" >&3 && cat <&3' 2>/dev/null) &&
    [[ $answer == *$'\r\n\r\nOK'* ]]; then
    break
  fi
  answer=
  kill -0 "$demo" 2>/dev/null || break
  sleep 1
done
kill -TERM "$demo" 2>/dev/null
wait "$demo"
if [[ -z $answer ]]; then
  step "FAILED: scripts/demo.sh never served OK on 127.0.0.1:8080"
  tail -30 /logs/demo.log
  exit 1
fi
step "ok: scripts/demo.sh served OK on 127.0.0.1:8080 ($SECONDS s: install, build, start)"
# 2. and 3. The second command.
if [[ $FULL == 1 ]]; then
  FCGI_HOST_SKIP_FUZZ=1 scripts/test.sh >/logs/test.log 2>&1
  status=$?
  sed -n '/Skipped here/,$p' /logs/test.log | awk 'NR <= 40' # (no early close: no SIGPIPE)
  ((status == 0)) || { tail -60 /logs/test.log; step "FAILED: scripts/test.sh"; exit 1; }
  step "ok: scripts/test.sh passed ($SECONDS s)"
  exit 0
fi
if ! scripts/test.sh --install-only >/logs/test-install.log 2>&1; then
  tail -30 /logs/test-install.log
  step "FAILED: scripts/test.sh --install-only"
  exit 1
fi
step "ok: scripts/test.sh's packages installed ($SECONDS s)"
if ! { cmake -S . -B build-test -DFCGI_HOST_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_CXX_FLAGS_DEBUG=-g1 &&
  cmake --build build-test -j"$(nproc)" --target fcgi-host unit_tests; } >/logs/test-build.log 2>&1; then
  tail -30 /logs/test-build.log
  step "FAILED: the test build (fcgi-host, unit_tests)"
  exit 1
fi
step "ok: the test build of fcgi-host and unit_tests ($SECONDS s)"
cd build-test
# (without the check of the case names, which reads every test binary)
if ! ctest -L unit -E test_case_names_without_semicolon --output-on-failure >/logs/ctest.log 2>&1; then
  tail -40 /logs/ctest.log
  step "FAILED: ctest -L unit"
  exit 1
fi
step "ok: $(grep -m1 'tests passed' /logs/ctest.log) (ctest -L unit, $SECONDS s)"
STEPS

mkdir "$work/logs"
say "running the README's commands in a bare Debian 12 (podman run $image)"
status=0
podman run --name "$container" --env FULL=$full \
  -v "$work/src:/root/fcgi-host" -v "$work/logs:/logs" -v "$work/steps.sh:/steps.sh:ro" \
  "$image" bash /steps.sh || status=$?
if ((status != 0)); then
  say "FAILED after $((SECONDS - started)) s (exit $status)"
  exit 1
fi
say "passed in $((SECONDS - started)) s"
