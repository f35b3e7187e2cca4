# Shared by scripts/release.sh, scripts/release-check.sh and scripts/apicheck.sh (sourced, not run).
# shellcheck shell=bash

MODPREFIX=github.com/coordkit/coordkit
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) PATH="$PATH:/usr/local/go/bin" ;; esac

# Where releases are prepared and rehearsed: a module cache of their own (coordkit versions served by
# a local clone must never enter the user's module cache, where they would shadow the published ones),
# the release's work clone and the check's scratch repositories. Paths stay the same from run to run
# so the build cache serves unchanged packages.
RELEASE_CACHE=${COORDKIT_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coordkit/release}

# dur <seconds>: 42s, 3m04s
dur() { if [ "$1" -lt 60 ]; then echo "${1}s"; else printf '%dm%02ds\n' $(($1 / 60)) $(($1 % 60)); fi; }

# released_modules [FILE]: one "dir version" line per module of versions.yaml's module-sets.
released_modules() {
  awk -v p="$MODPREFIX/" '
    /^module-sets:/ { s = 1; next }
    /^[^ #]/ { s = 0 }
    s && $1 == "version:" { v = $2 }
    s && $1 == "-" && index($2, p) == 1 { print substr($2, length(p) + 1), v }
  ' "${1:-versions.yaml}"
}

# excluded_modules [FILE]: the dirs of versions.yaml's excluded-modules.
excluded_modules() {
  awk -v p="$MODPREFIX/" '
    /^excluded-modules:/ { s = 1; next }
    /^[^ #]/ { s = 0 }
    s && $1 == "-" && index($2, p) == 1 { print substr($2, length(p) + 1) }
  ' "${1:-versions.yaml}"
}

# check_module_lists DIR: every module of the tree at DIR is listed exactly once in its versions.yaml
# (module-sets or excluded-modules), and every listed module exists.
check_module_lists() {
  local dir=$1 on_disk listed bad=0
  on_disk=$(cd "$dir" && find . -name go.mod -not -path './.git/*' | sed 's|^\./||; s|/go.mod$||' | sort)
  listed=$( { released_modules "$dir/versions.yaml" | cut -d' ' -f1; excluded_modules "$dir/versions.yaml"; } | sort)
  if [ -n "$(comm -23 <(echo "$on_disk") <(echo "$listed"))" ]; then
    echo "versions.yaml lists neither as released nor as excluded: $(comm -23 <(echo "$on_disk") <(echo "$listed") | tr '\n' ' ')"
    bad=1
  fi
  if [ -n "$(comm -13 <(echo "$on_disk") <(echo "$listed"))" ]; then
    echo "versions.yaml lists modules that do not exist: $(comm -13 <(echo "$on_disk") <(echo "$listed") | tr '\n' ' ')"
    bad=1
  fi
  if [ -n "$(echo "$listed" | uniq -d)" ]; then
    echo "versions.yaml lists twice: $(echo "$listed" | uniq -d | tr '\n' ' ')"
    bad=1
  fi
  return $bad
}

# sibling_requires GOMOD: "dir version" for each coordkit module that GOMOD requires.
sibling_requires() {
  awk -v p="$MODPREFIX/" '
    $1 == "require" && $2 == "(" { r = 1; next }
    r && $1 == ")" { r = 0; next }
    $1 == "require" && index($2, p) == 1 { print substr($2, length(p) + 1), $3; next }
    r && index($1, p) == 1 { print substr($1, length(p) + 1), $2 }
  ' "$1"
}

# semver: only vMAJOR.MINOR.PATCH (no pre-release or build suffix), which is all Coordkit tags.
is_semver() { [[ $1 =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; }
# ver_cmp A B: prints -1, 0 or 1.
ver_cmp() {
  local a b i
  IFS=. read -r -a a <<<"${1#v}"
  IFS=. read -r -a b <<<"${2#v}"
  for i in 0 1 2; do
    if ((a[i] < b[i])); then echo -1; return; fi
    if ((a[i] > b[i])); then echo 1; return; fi
  done
  echo 0
}
ver_major() { local v=${1#v}; echo "${v%%.*}"; }
ver_minor() { local v=${1#v}; v=${v#*.}; echo "${v%%.*}"; }

# module_tags REPO DIR: the versions DIR is tagged with in REPO, lowest first.
module_tags() {
  git -C "$1" tag -l "$2/v*" | sed "s|^$2/||" | while read -r v; do is_semver "$v" && echo "$v"; done | sort -V
}

# use_remote REPO: from now on the go command fetches github.com/coordkit/coordkit/* from the git
# repository REPO (file://, through git's url.<base>.insteadOf given in the environment: no git
# configuration is written) and never from a module proxy; every other module comes from the user's
# module cache when it is there, else from the user's GOPROXY. GOWORK=off: the modules resolve their
# siblings by version, as a consumer's build does.
use_remote() {
  local userproxy usercache userflags
  userproxy=$(env -u GOPROXY go env GOPROXY)
  usercache=$(env -u GOMODCACHE go env GOMODCACHE)
  userflags=$(env -u GOFLAGS go env GOFLAGS)
  export GOMODCACHE="$RELEASE_CACHE/modcache"
  export GOPROXY="file://$usercache/cache/download,$userproxy"
  export GOPRIVATE="$MODPREFIX" GONOSUMDB="$MODPREFIX" GONOPROXY="$MODPREFIX"
  export GOWORK=off GOFLAGS="${userflags:+$userflags }-modcacherw"
  # The go command indexes module-cache packages by path@version in the build cache (modindex),
  # assuming a version's files never change; a rehearsal re-creates the same versions from newer
  # commits, so the index must not be used (a stale one listed an earlier luakit v0.1.0's files).
  export GODEBUG="${GODEBUG:+$GODEBUG,}goindex=0"
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="url.file://$1.insteadOf" GIT_CONFIG_VALUE_0="https://$MODPREFIX"
  export GIT_TERMINAL_PROMPT=0
}

# forget_coordkit: removes every coordkit module and the go command's git clones from the release
# module cache, so the next fetch reads the tags as they are now (a version once cached is never
# fetched again). Third-party modules stay.
forget_coordkit() {
  local mc="$RELEASE_CACHE/modcache"
  chmod -R u+w "$mc/github.com/coordkit" "$mc/cache/vcs" 2>/dev/null || true
  rm -rf "$mc/github.com/coordkit" "$mc/cache/download/github.com/coordkit" "$mc/cache/vcs"
}

# release_lock: one release or check at a time per cache (they share the work directories).
release_lock() {
  mkdir -p "$RELEASE_CACHE"
  exec 9>"$RELEASE_CACHE/.lock"
  if ! flock -n 9; then
    echo "waiting for another release or release check ($RELEASE_CACHE/.lock)"
    flock 9
  fi
}

# git_identity: commits in scratch clones need an identity; the user's own is kept when set.
git_identity() {
  git config user.email >/dev/null 2>&1 || export GIT_AUTHOR_NAME="coordkit release" GIT_AUTHOR_EMAIL="release@localhost" \
    GIT_COMMITTER_NAME="coordkit release" GIT_COMMITTER_EMAIL="release@localhost"
}
