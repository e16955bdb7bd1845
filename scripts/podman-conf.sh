# Sourced by the scripts that run podman (kube-test.sh, fresh-test.sh): podman configured by
# the script, not by the system.
#
# use_private_podman_conf DIR: writes DIR/containers.conf and exports CONTAINERS_CONF to it:
# runc where it is installed (crun refuses a hybrid cgroup hierarchy), cgroupfs (no systemd
# needed), and default ulimits within this shell's hard limits (podman's defaults may exceed
# them, and then no container starts).
use_private_podman_conf() {
  local dir=$1 nofile nproc runtime=
  nofile=$(podman_hard_limit -n 1024)
  nproc=$(podman_hard_limit -u 4096)
  command -v runc >/dev/null && runtime='runtime = "runc"'
  export CONTAINERS_CONF=$dir/containers.conf
  cat >"$CONTAINERS_CONF" <<CONF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
cgroup_manager = "cgroupfs"
$runtime
CONF
}

# podman_hard_limit ULIMIT_FLAG CAP: this shell's hard limit, at most CAP.
podman_hard_limit() {
  local h
  h=$(ulimit -H "$1")
  [[ $h == unlimited || $h -gt $2 ]] && h=$2
  echo "$h"
}
