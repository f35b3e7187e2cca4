#!/usr/bin/env bash
# Rehearses a release of this checkout without publishing anything (`make release-check`; part of
# `make test`):
#
#   scripts/release-check.sh
#
#  1. clone: a scratch clone of this checkout (HEAD plus uncommitted changes to tracked files, through
#     `git stash create`; untracked files are not in it);
#  2. release: scripts/release.sh in that clone: a release commit without replace lines and one tag per
#     module of versions.yaml (see scripts/release.sh);
#  3. consumers: for each released module, a consumer module outside the repository (GOWORK=off)
#     `go get`s the module alone at its tag, from the scratch clone served as the git remote (git's
#     insteadOf in the environment; GOPRIVATE, so never a module proxy), prints the size of its module
#     graph, builds the first Go block of the module's README (scripts/release/examples/) and runs it
#     against a real server started for the check (redis8 or valkey9 from testkit's server cache);
#  4. coordctl: runs the README's `go install .../coordctl@...` line as written, `coordctl --help`
#     and `coordctl lock inspect` of the lock example's lock on that server;
#  5. patch: a new commit changes lock alone, versions.yaml says the next patch version, release.sh
#     tags lock alone, and a consumer resolves it with its siblings' older tags (and leader's older
#     tag, which requires the older lock, builds against it);
#  6. apicheck: scripts/apicheck.sh on an incompatible change to lock: fails for a patch bump, passes for
#     a minor bump (pre-1.0 rule), fails without a CHANGELOG entry.
#
# Prints a step summary (result and duration) and the module graph sizes; exits 1 when a step failed.
# Work files: $COORDKIT_RELEASE_CACHE (default ~/.cache/coordkit/release), reused from run to run.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=release/lib.sh
. "$here/release/lib.sh"
ROOT=$(cd "$here/.." && pwd)
CHECK="$RELEASE_CACHE/check"
ORIGIN="$CHECK/origin"
start=$SECONDS

release_lock
export COORDKIT_RELEASE_LOCKED=1
git_identity

declare -a step_names=() step_results=() step_secs=() graph_lines=()
failed=0
# step NAME CMD...: runs CMD, records its result and duration.
step() {
  local name=$1 t0=$SECONDS r=ok
  shift
  echo
  echo "==> $name"
  "$@" || { r=FAIL; failed=1; }
  step_names+=("$name") step_results+=("$r") step_secs+=($((SECONDS - t0)))
  echo "==> $name: $r in $(dur $((SECONDS - t0)))"
  [ "$r" = ok ]
}
summary() {
  echo
  echo "release check summary:"
  local i
  for i in "${!step_names[@]}"; do printf '  %-40s %-5s %s\n' "${step_names[$i]}" "${step_results[$i]}" "$(dur "${step_secs[$i]}")"; done
  if [ ${#graph_lines[@]} -gt 0 ]; then
    echo
    echo "module graph of a consumer that requires one module alone (go get <module>@<tag>, GOWORK=off):"
    printf '  %-12s %-8s %8s %6s\n' module version modules edges
    printf '%s\n' "${graph_lines[@]}"
  fi
  echo
  if [ $failed = 1 ]; then echo "release check: FAIL in $(dur $((SECONDS - start)))"; else echo "release check: ok in $(dur $((SECONDS - start)))"; fi
}

# --- the server -------------------------------------------------------------------------------------
server_pid=""
cleanup() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null; }
trap cleanup EXIT

# A server with hash-field TTL (lease's example needs Redis 7.4+ or Valkey 9+), found where testkit
# finds it.
server_bin() {
  local cache=${COORDKIT_SERVER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coordkit/servers} t b
  for t in redis8 valkey9; do
    for b in redis-server valkey-server; do
      [ -x "$cache/$t/bin/$b" ] && { echo "$cache/$t/bin/$b"; return 0; }
    done
  done
  return 1
}
ping_server() { # ping_server PORT: true when the server answers PING with PONG
  local line
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  IFS= read -r -t 2 line <&3
  exec 3<&-
  [ "${line%$'\r'}" = "+PONG" ]
}
start_server() {
  local bin port tries
  bin=$(server_bin) || { echo "no redis8 or valkey9 server in testkit's cache: run make servers SERVERS=redis8"; return 1; }
  for tries in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # in use
    mkdir -p "$CHECK/server"
    "$bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$CHECK/server" \
      --logfile "$CHECK/server/server.log" >/dev/null 2>&1 &
    server_pid=$!
    for _ in $(seq 50); do
      ping_server "$port" && { ADDR="127.0.0.1:$port"; echo "server: $bin on $ADDR (pid $server_pid)"; return 0; }
      sleep 0.1
    done
    kill "$server_pid" 2>/dev/null
    server_pid=""
  done
  echo "could not start $bin"
  return 1
}

# --- 1. clone ---------------------------------------------------------------------------------------
clone() {
  local rev
  rev=$(git -C "$ROOT" stash create 2>/dev/null)
  if [ -n "$rev" ]; then
    echo "checkout: HEAD $(git -C "$ROOT" rev-parse --short HEAD) with uncommitted changes to tracked files (untracked files are left out)"
  else
    rev=$(git -C "$ROOT" rev-parse HEAD)
    echo "checkout: HEAD $(git -C "$ROOT" rev-parse --short HEAD)"
  fi
  rm -rf "$CHECK"
  mkdir -p "$CHECK"
  git clone -q --no-checkout "$ROOT" "$ORIGIN" &&
    git -C "$ORIGIN" fetch -q "$ROOT" "$rev" &&
    git -C "$ORIGIN" checkout -q -B main "$rev" &&
    echo "scratch clone: $ORIGIN ($(git -C "$ORIGIN" tag -l | wc -l) tags from the checkout)"
}

# --- 3. consumers -----------------------------------------------------------------------------------
# example_program README HARNESS OUT: OUT/main.go is HARNESS/main.go around README's first Go block.
example_program() {
  local readme=$1 harness=$2 out=$3 block decls code f
  block=$(awk '/^```go[[:space:]]*$/ && !done { f = 1; next } f && /^```/ { f = 0; done = 1 } f' "$readme")
  [ -n "$block" ] || { echo "no Go block in $readme"; return 1; }
  block=${block//127.0.0.1:6379/$ADDR}
  decls=$(printf '%s\n' "$block" | awk '!h && /^(\/\/go:|var |const |type )/ { print; next } { h = 1 }')
  code=$(printf '%s\n' "$block" | awk '!h && /^(\/\/go:|var |const |type )/ { next } { h = 1; print }')
  if [ -n "$decls" ] && ! grep -q '^//README:decls$' "$harness/main.go"; then
    echo "$readme: the block starts with package-level declarations and $harness/main.go has no //README:decls"
    return 1
  fi
  DECLS=$decls CODE=$code awk '
    /^[[:space:]]*\/\/README:decls$/ { print ENVIRON["DECLS"]; next }
    /^[[:space:]]*\/\/README:code$/ { print ENVIRON["CODE"]; next }
    { print }' "$harness/main.go" >"$out/main.go"
  cp "$here/release/examples/common.go" "$out/"
  for f in "$harness"/*; do [ "$(basename "$f")" = main.go ] || cp "$f" "$out/"; done
}

# consumer NAME MODULE@VERSION...: a fresh consumer module NAME that go-gets the given modules.
consumer() {
  local name=$1
  shift
  CONSUMER="$CHECK/consumers/$name"
  rm -rf "$CONSUMER" && mkdir -p "$CONSUMER" && cd "$CONSUMER" &&
    go mod init "example.com/consumer/$name" >/dev/null 2>&1 &&
    go get "${@/#/$MODPREFIX/}"
}

# readme_example DIR: builds DIR's README example in the current consumer and runs it.
readme_example() {
  local dir=$1 moddir
  moddir=$(go list -m -f '{{.Dir}}' "$MODPREFIX/$dir") &&
    example_program "$moddir/README.md" "$ORIGIN/scripts/release/examples/$dir" "$CONSUMER" &&
    go mod tidy &&
    go build -o example . &&
    COORDKIT_EXAMPLE_ADDR=$ADDR ./example
}

consume() { # consume DIR VERSION: go get alone, graph size, README example
  local dir=$1 ver=$2 mods edges
  consumer "$dir" "$dir@$ver" || return 1
  mods=$(go list -m all | wc -l) edges=$(go mod graph | wc -l)
  graph_lines+=("$(printf '  %-12s %-8s %8s %6s' "$dir" "$ver" "$mods" "$edges")")
  echo "$dir $ver: module graph $mods modules, $edges edges; coordkit modules: $(go list -m all | grep "^$MODPREFIX/" | sed "s|^$MODPREFIX/||" | tr '\n' ' ' | sed 's/ $//;s/ \([^ ]*\) / \1, /g')"
  [ -d "$ORIGIN/scripts/release/examples/$dir" ] || { echo "$dir: a command module (no README example to build)"; return 0; }
  readme_example "$dir"
}

# --- 4. coordctl ------------------------------------------------------------------------------------
install_coordctl() {
  local line pkgver out
  line=$(grep -o "go install $MODPREFIX/coordctl/cmd/coordctl@[^ \`]*" "$ORIGIN/README.md" | head -n1)
  [ -n "$line" ] || { echo "README.md has no 'go install $MODPREFIX/coordctl/cmd/coordctl@...' line"; return 1; }
  if grep -q "go install $MODPREFIX/coordctl/cmd/coordctl@" "$ORIGIN/coordctl/README.md" &&
    ! grep -qF "$line" "$ORIGIN/coordctl/README.md"; then
    echo "coordctl/README.md's install line differs from README.md's ($line)"
    return 1
  fi
  pkgver=${line#go install }
  echo "README: $line"
  mkdir -p "$CHECK/gopath-bin" && cd "$CHECK" &&
    GOBIN="$CHECK/gopath-bin" go install "$pkgver" &&
    echo "installed: $(go version -m "$CHECK/gopath-bin/coordctl" | awk '$1 == "mod" { print $2, $3 }')" &&
    out=$("$CHECK/gopath-bin/coordctl" --help) && echo "\$ coordctl --help" && head -n 3 <<<"$out" && echo "..." &&
    echo "\$ coordctl --url redis://$ADDR lock inspect invoice:42" &&
    out=$("$CHECK/gopath-bin/coordctl" --url "redis://$ADDR" lock inspect invoice:42) &&
    echo "$out" && grep -q '^fencing token  *[1-9]' <<<"$out"
}

# --- 5. patch release of one module ------------------------------------------------------------------
set_version() { # set_version SET VERSION: versions.yaml's version of module set SET
  awk -v set="$1" -v v="$2" '
    /^  [a-z]/ { cur = $1; sub(/:$/, "", cur) }
    cur == set && $1 == "version:" { sub(/v[0-9.]+/, v) }
    { print }' versions.yaml >versions.yaml.new && mv versions.yaml.new versions.yaml
}
changelog_entry() { # changelog_entry DIR VERSION TEXT: a "## VERSION" section under the title
  awk -v h="## $2" -v t="- $3" 'NR == 1 { print; print ""; print h; print ""; print t; next } { print }' \
    "$1/CHANGELOG.md" >"$1/CHANGELOG.md.new" && mv "$1/CHANGELOG.md.new" "$1/CHANGELOG.md"
}
version_of() { released_modules "$ORIGIN/versions.yaml" | awk -v d="$1" '$1 == d { print $2 }'; }
next_patch() { local v=${1#v}; echo "v${v%.*}.$((${v##*.} + 1))"; }
next_minor() { echo "v$(ver_major "$1").$(($(ver_minor "$1") + 1)).0"; }

patch_release() {
  local old new leaderver
  cd "$ORIGIN" || return 1
  old=$(version_of lock) new=$(next_patch "$(version_of lock)") leaderver=$(version_of leader)
  printf '\n// A patch release of lock alone (scripts/release-check.sh).\n' >>lock/doc.go
  set_version lock "$new"
  changelog_entry lock "$new" "Rehearsal of a patch release (scripts/release-check.sh)."
  git commit -q -am "lock $new: a patch release rehearsal" || return 1
  echo "--- release.sh: only lock/$new is untagged (its API check: a doc comment changed)"
  scripts/release.sh --repo "$ORIGIN" || return 1
  [ "$(git tag --points-at "lock/$new^{commit}" | tr '\n' ' ')" = "lock/$new " ] || { echo "expected lock/$new alone on its release commit"; return 1; }
  use_remote "$ORIGIN"
  forget_coordkit
  echo "--- a consumer of lock $new"
  consumer lock-patch "lock@$new" || return 1
  go list -m all | grep "^$MODPREFIX/"
  go list -m "$MODPREFIX/luakit" | grep -q " $(version_of luakit)\$" || { echo "expected luakit's older tag"; return 1; }
  readme_example lock || return 1
  echo "--- the same consumer adds leader $leaderver (released with lock $old): MVS keeps lock $new"
  go get "$MODPREFIX/leader@$leaderver" &&
    go list -m all | grep "^$MODPREFIX/" &&
    go list -m "$MODPREFIX/lock" | grep -q " $new\$" &&
    go build "$MODPREFIX/leader" && echo "leader $leaderver builds against lock $new"
}

# --- 6. API compatibility check ----------------------------------------------------------------------
# expect_apicheck WANT PATTERN: scripts/apicheck.sh lock exits with WANT (0 or 1) and prints PATTERN.
expect_apicheck() {
  local want=$1 pattern=$2 out got=0
  out=$(scripts/apicheck.sh lock 2>&1) || got=$?
  echo "$out" | sed 's/^/    /'
  if [ "$got" != "$want" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "expected apicheck to exit $want and print '$pattern'; it exited $got"
    return 1
  fi
  echo "(as expected: exit $got)"
}

api_demo() {
  local tagged patch minor
  cd "$ORIGIN" || return 1
  tagged=$(version_of lock) patch=$(next_patch "$(version_of lock)") minor=$(next_minor "$(version_of lock)")
  # Incompatible: an exported method renamed (ForceReleaseKeys disappears).
  sed -i 's/\bForceReleaseKeys\b/ForceReleaseKeyPair/g' lock/*.go
  echo "--- lock/$tagged tagged; ForceReleaseKeys renamed ForceReleaseKeyPair; versions.yaml $patch (patch), CHANGELOG entry"
  set_version lock "$patch"
  changelog_entry lock "$patch" "ForceReleaseKeys is renamed ForceReleaseKeyPair."
  expect_apicheck 1 "incompatible changes need $minor" || return 1
  echo "--- the same with versions.yaml $minor (minor: the pre-1.0 rule)"
  git checkout -q lock/CHANGELOG.md
  set_version lock "$minor"
  changelog_entry lock "$minor" "ForceReleaseKeys is renamed ForceReleaseKeyPair."
  expect_apicheck 0 "ok" || return 1
  echo "--- the same without the CHANGELOG entry"
  git checkout -q lock/CHANGELOG.md
  expect_apicheck 1 "CHANGELOG" || return 1
  git checkout -q -- .
}

# --- run ----------------------------------------------------------------------------------------------
step "server" start_server || { summary; exit 1; }
step "clone" clone || { summary; exit 1; }
step "release (scripts/release.sh)" bash -c "cd '$ORIGIN' && scripts/release.sh --repo '$ORIGIN'" || { summary; exit 1; }

use_remote "$ORIGIN"
forget_coordkit
mapfile -t released < <(released_modules "$ORIGIN/versions.yaml")
for mv in "${released[@]}"; do
  step "consumer: $mv" consume $mv
done
step "coordctl: README install line, inspect" install_coordctl
step "patch: lock alone, siblings' older tags" patch_release
step "apicheck: incompatible change to lock" api_demo
forget_coordkit
summary
exit $failed
