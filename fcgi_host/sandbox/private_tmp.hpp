#pragma once
// --private-tmp: a /tmp of the pool's own, like systemd's PrivateTmp. The master (root) makes
// one mount namespace in which an empty tmpfs (mode 1777, nosuid, nodev) is mounted on /tmp;
// every worker of the pool joins it before it drops its privileges (prepare_sandbox), so the
// pool's workers share that /tmp and see nothing of the machine's. The master itself stays in
// the machine's namespace (its socket file, its logs). The tmpfs lives as long as the master
// holds the namespace: a reload keeps it, a restart empties it.
#include <string>

namespace fcgi_host {

// The master's private /tmp namespace, made on the first call (a short-lived child does the
// unshare and the mount: the master's own namespace never changes). The descriptor, or -1
// with `error` set.
int private_tmp_namespace(std::string& error);

} // namespace fcgi_host
