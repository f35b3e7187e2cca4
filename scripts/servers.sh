#!/usr/bin/env bash
# Installs or builds the Redis / Valkey server binaries that testkit and the demo use, and caches them
# outside the checkout so later runs are quick:
#
#   ${COORDKIT_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coordkit/servers}/<target>/bin/<flavor>-server
#
# Usage: scripts/servers.sh [target ...]        (default: every target in TARGETS)
#        scripts/servers.sh --list               (print targets and whether each is cached)
#
# Targets (one line each in the table below; adding a server is one line plus, at most, one function):
#   redis70   Debian bookworm's redis-server package (Redis 7.0.x)
#   redis8    upstream Redis 8.x tarball from Debian unstable's source package, built with make -j2
#   valkey8   bookworm-backports' valkey-server package (Valkey 8.0.x)
#   valkey9   upstream Valkey 9.x tarball from Debian unstable's source package, built with make -j2
#
# It also installs valgrind (Debian's package) when it is missing: the peer runner counts client
# instructions with callgrind, and bench's tests run it.
#
# The Debian mirror is read from this machine's apt sources; no host name is written in this repository.
# Without root or apt-get, the script does not fail: it reports what is missing, and testkit falls back
# to a redis-server on PATH or to COORDKIT_REDIS_URL.
set -euo pipefail

CACHE="${COORDKIT_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coordkit/servers}"
JOBS="${COORDKIT_BUILD_JOBS:-2}"

# target | flavor | method | package or source package
TARGETS=(
  "redis70|redis|deb|redis-server"
  "redis8|redis|src|redis"
  "valkey8|valkey|backports|valkey-server"
  "valkey9|valkey|src|valkey"
)

log() { printf 'servers: %s\n' "$*" >&2; }

field() { # field <target-line> <n>
  local IFS='|'; read -r -a f <<<"$1"; printf '%s' "${f[$2]}"
}

can_apt() { command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; }

# mirror prints the Debian archive URI configured on this machine (deb822 or one-line format).
mirror() {
  local m=""
  if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
    m=$(awk '
      /^Types:/ {deb = ($0 ~ /deb/)}
      /^URIs:/ {uri = $2}
      /^Suites:/ { if (deb && $0 ~ /bookworm([[:space:]]|$)/ && uri !~ /security/) { print uri; exit } }
    ' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list || true)
  fi
  [ -n "$m" ] || return 1
  printf '%s' "${m%/}"
}

apt_updated=""
apt_update_once() {
  [ -n "$apt_updated" ] && return 0
  log "apt-get update"
  apt-get update -qq >/dev/null
  apt_updated=1
}

# no_service_start keeps Debian maintainer scripts from starting a packaged server on its default port.
with_no_service_start() {
  local rc=0 had=""
  [ -e /usr/sbin/policy-rc.d ] && had=1
  if [ -z "$had" ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi
  "$@" || rc=$?
  [ -z "$had" ] && rm -f /usr/sbin/policy-rc.d
  return $rc
}

# pids_of <binary-name> prints the PIDs of running /usr/bin/<binary-name> processes.
pids_of() {
  local pid
  for pid in $(pgrep -x "$1" 2>/dev/null); do
    if [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "/usr/bin/$1" 2>/dev/null)" ]; then echo "$pid"; fi
  done
  return 0
}

stop_packaged_service() { # stop_packaged_service <binary-name> <pids running before the install>
  # A package install on a machine with an init system may start the service despite policy-rc.d:
  # stop only a server the install itself started, never one that was already running (a
  # developer's own Redis, another test run's server).
  local pid
  for pid in $(pids_of "$1"); do
    case " $2 " in *" $pid "*) ;; *) kill "$pid" 2>/dev/null || true ;; esac
  done
}

# backports_opts prints apt-get options for a private source list holding this machine's bookworm
# archive plus bookworm-backports (the machine's own apt configuration is not changed).
backports_state=""
backports_opts() {
  local m; m=$(mirror) || { log "no Debian mirror found in /etc/apt/sources.list*"; return 1; }
  if [ -z "$backports_state" ]; then
    backports_state=$(mktemp -d "${TMPDIR:-/tmp}/coordkit-apt.XXXXXX")
    mkdir -p "$backports_state/lists/partial"
    printf 'deb %s bookworm main\ndeb %s bookworm-backports main\n' "$m" "$m" >"$backports_state/sources.list"
    apt-get -o "Dir::Etc::sourcelist=$backports_state/sources.list" -o "Dir::Etc::sourceparts=-" \
      -o "Dir::State::Lists=$backports_state/lists" -o "APT::Sandbox::User=root" update -qq >/dev/null
  fi
  printf '%s\n' -o "Dir::Etc::sourcelist=$backports_state/sources.list" -o "Dir::Etc::sourceparts=-" \
    -o "Dir::State::Lists=$backports_state/lists" -t bookworm-backports
}

install_deb() { # install_deb <target> <flavor> <package> [apt-get options...]
  local target=$1 flavor=$2 pkg=$3; shift 3
  local dest="$CACHE/$target/bin"
  if ! can_apt; then
    log "$target: needs root and apt-get to install the '$pkg' package; skipped (testkit will use $flavor-server from PATH or COORDKIT_REDIS_URL)"
    return 1
  fi
  apt_update_once
  log "$target: apt-get install $pkg"
  local before; before=$(pids_of "$flavor-server" | tr '\n' ' ')
  with_no_service_start env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" "$pkg" >/dev/null
  stop_packaged_service "$flavor-server" "$before"
  mkdir -p "$dest"
  cp -f "/usr/bin/$flavor-server" "$dest/$flavor-server"
  if [ -x "/usr/bin/$flavor-cli" ]; then cp -f "/usr/bin/$flavor-cli" "$dest/$flavor-cli"; fi
}

# sid_source downloads Debian unstable's source package <srcpkg> into <dir> using a private apt state
# (a temporary deb-src entry; the machine's own apt configuration is not changed).
sid_source() { # sid_source <srcpkg> <dir>
  local srcpkg=$1 dir=$2 m
  m=$(mirror) || { log "no Debian mirror found in /etc/apt/sources.list*"; return 1; }
  local state="$dir/apt"
  mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
  printf 'deb-src %s sid main\n' "$m" >"$state/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$state/sources.list" -o "Dir::Etc::sourceparts=-"
              -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache"
              -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root")
  log "downloading source package $srcpkg (sid)"
  apt-get "${opts[@]}" update -qq >/dev/null
  (cd "$dir" && apt-get "${opts[@]}" source --download-only -qq "$srcpkg" >/dev/null)
}

build_src() { # build_src <target> <flavor> <srcpkg>
  local target=$1 flavor=$2 srcpkg=$3
  local dest="$CACHE/$target/bin"
  if ! command -v apt-get >/dev/null 2>&1; then
    log "$target: needs apt-get to fetch the $srcpkg source package; skipped"
    return 1
  fi
  for tool in make gcc; do
    if ! command -v $tool >/dev/null 2>&1; then
      if can_apt; then apt_update_once; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential >/dev/null
      else log "$target: needs $tool to build; skipped"; return 1; fi
    fi
  done
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/coordkit-$target.XXXXXX")
  sid_source "$srcpkg" "$work"
  local tarball; tarball=$(ls "$work"/"${srcpkg}"_*.orig.tar.* 2>/dev/null | head -n 1)
  [ -n "$tarball" ] || { log "$target: no upstream tarball in the $srcpkg source package"; return 1; }
  log "$target: building $(basename "$tarball") with make -j$JOBS (a few minutes)"
  mkdir -p "$work/src"
  tar -xf "$tarball" -C "$work/src" --strip-components=1
  (cd "$work/src" && make -j"$JOBS" BUILD_TLS=no >"$work/build.log" 2>&1) || {
    log "$target: build failed; last lines of the log:"; tail -n 30 "$work/build.log" >&2; return 1; }
  mkdir -p "$dest"
  cp -f "$work/src/src/$flavor-server" "$dest/$flavor-server"
  cp -f "$work/src/src/$flavor-cli" "$dest/$flavor-cli" 2>/dev/null || true
  rm -rf "$work"
}

cached() { [ -x "$CACHE/$1/bin/$2-server" ] && "$CACHE/$1/bin/$2-server" --version >/dev/null 2>&1; }

ensure() { # ensure <target-line>
  local line=$1 target flavor method pkg
  target=$(field "$line" 0); flavor=$(field "$line" 1); method=$(field "$line" 2); pkg=$(field "$line" 3)
  if cached "$target" "$flavor"; then
    log "$target: cached ($("$CACHE/$target/bin/$flavor-server" --version | awk '{print $3}'))"
    return 0
  fi
  local lock="$CACHE/.$target.lock"
  mkdir -p "$CACHE"
  (
    flock 9
    cached "$target" "$flavor" && exit 0
    case "$method" in
      deb) install_deb "$target" "$flavor" "$pkg" ;;
      backports)
        can_apt || { log "$target: needs root and apt-get; skipped"; exit 1; }
        mapfile -t bopts < <(backports_opts) && install_deb "$target" "$flavor" "$pkg" "${bopts[@]}" ;;
      src) build_src "$target" "$flavor" "$pkg" ;;
      *) log "$target: unknown method $method"; exit 1 ;;
    esac
  ) 9>"$lock"
  if cached "$target" "$flavor"; then
    log "$target: ready ($("$CACHE/$target/bin/$flavor-server" --version | awk '{print $3}'))"
  else
    return 1
  fi
}

# ensure_valgrind installs Debian's valgrind package when valgrind is missing (root and apt-get).
ensure_valgrind() {
  command -v valgrind >/dev/null 2>&1 && return 0
  if can_apt; then
    apt_update_once
    log "apt-get install valgrind"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
  else
    log "valgrind: needs root and apt-get to install it; skipped (the peer runner then prints no instruction counts)"
  fi
}

main() {
  if [ "${1:-}" = "--list" ]; then
    for line in "${TARGETS[@]}"; do
      t=$(field "$line" 0); f=$(field "$line" 1)
      if cached "$t" "$f"; then printf '%-10s %s\n' "$t" "$CACHE/$t/bin/$f-server"; else printf '%-10s missing\n' "$t"; fi
    done
    return 0
  fi
  ensure_valgrind
  local want=("$@") failed=()
  [ ${#want[@]} -gt 0 ] || for line in "${TARGETS[@]}"; do want+=("$(field "$line" 0)"); done
  for w in "${want[@]}"; do
    local found=""
    for line in "${TARGETS[@]}"; do
      if [ "$(field "$line" 0)" = "$w" ]; then found=$line; fi
    done
    [ -n "$found" ] || { log "unknown target '$w'"; failed+=("$w"); continue; }
    ensure "$found" || failed+=("$w")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    log "not available: ${failed[*]}"
    return 1
  fi
}

main "$@"
