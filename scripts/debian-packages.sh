#!/usr/bin/env bash
# The Debian 12 packages of one or more groups of scripts/debian-packages.txt, one a line:
#   scripts/debian-packages.sh build demo
# Sourced by the scripts that install (demo.sh, test.sh, package-test.sh, fresh-test.sh), it
# defines instead:
#   debian_packages GROUP...          the packages, one a line (an unknown group is an error)
#   install_debian_packages GROUP...  apt-get installs those not installed yet (sudo unless
#                                     root), with no service started by the installation
debian_packages_file="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/debian-packages.txt"

debian_packages() {
  local group found line
  for group in "$@"; do
    found=0
    while read -r line; do
      [[ $line == "$group "* ]] || continue
      found=1
      tr ' ' '\n' <<<"${line#"$group "}" | sed '/^$/d'
    done < <(sed 's/#.*//' "$debian_packages_file")
    ((found)) || {
      echo "debian-packages: no group '$group' in $debian_packages_file" >&2
      return 2
    }
  done
}

install_debian_packages() {
  local wanted missing=() p
  wanted=$(debian_packages "$@") || return
  for p in $wanted; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  echo "installing (Debian packages: $*): ${missing[*]}"
  local sudo=()
  ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update
  # Some packages (the front servers, nginx) would start their system services on ports 80 and
  # 443; nothing here needs them, so no service starts while they are installed.
  local no_start=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $no_start ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$no_start" >/dev/null
    "${sudo[@]}" chmod 755 "$no_start"
    made_policy=1
  fi
  local status=0
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends \
    "${missing[@]}" || status=$?
  ((made_policy)) && "${sudo[@]}" rm -f "$no_start"
  return "$status"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  (($#)) || {
    echo "usage: scripts/debian-packages.sh GROUP... (groups: $(sed 's/#.*//' \
      "$debian_packages_file" | awk 'NF { print $1 }' | uniq | xargs))" >&2
    exit 2
  }
  debian_packages "$@"
fi
