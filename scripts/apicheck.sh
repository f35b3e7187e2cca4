#!/usr/bin/env bash
# API compatibility of the released modules against their last tags (`make lint`):
#
#   scripts/apicheck.sh [MODULE...]       (default: every module of versions.yaml; others are ignored)
#
# A module's last tag is its highest <dir>/vX.Y.Z tag. With none, the module is skipped, saying so.
# Otherwise apidiff (golang.org/x/exp/cmd/apidiff, pinned in tools/go.mod) compares the exported API
# of every package of the module at that tag with the working tree, prints the changes, and checks
# them against the version versions.yaml names for the next release:
#
#   incompatible changes   v0.x: versions.yaml must name at least the next minor (v0.1.3 -> v0.2.0);
#                          v1+: fail (a new major version is a new module path, .../<dir>/v2)
#   compatible changes     v1+: at least the next minor once versions.yaml names a new version;
#                          v0.x: any new version (a note says the next release needs one)
#   any change             <dir>/CHANGELOG.md gains lines since the tag, and has a "## <version>"
#                          heading when versions.yaml names a new version
#
# A tag above versions.yaml's version fails too. The old API is read from the tag's tree (git archive,
# its released modules joined by a temporary go.work), the new one from the working tree, so nothing
# is fetched but third-party modules missing from the module cache.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=release/lib.sh
. "$here/release/lib.sh"
ROOT=$(cd "$here/.." && pwd)
cd "$ROOT"

declare -A version
while read -r dir ver; do version[$dir]=$ver; done < <(released_modules versions.yaml)
if [ $# -gt 0 ]; then
  modules=()
  for m in "$@"; do [ -n "${version[$m]:-}" ] && modules+=("$m"); done
else
  mapfile -t modules < <(released_modules versions.yaml | cut -d' ' -f1)
fi
[ ${#modules[@]} -gt 0 ] || { echo "apicheck: no released module selected"; exit 0; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/coordkit-apicheck.XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
apidiff=""
build_apidiff() {
  [ -n "$apidiff" ] && return 0
  (cd "$ROOT/tools" && GOWORK=off go build -o "$tmp/apidiff" golang.org/x/exp/cmd/apidiff) || return 1
  apidiff="$tmp/apidiff"
}

# old_tree TAG DIR: a directory holding the released modules of the tag's commit (extracted once per
# commit) and DIR.work, a go.work that uses DIR and replaces its siblings by their directories there
# (at a release commit the siblings are required by version, without replace lines).
old_tree() {
  local commit tree m mods
  commit=$(git rev-parse "refs/tags/$1^{commit}") || return 1
  tree="$tmp/tree-$commit"
  if [ ! -d "$tree" ]; then
    mkdir -p "$tree"
    git show "$commit:versions.yaml" >"$tree/versions.yaml" || return 1
    mapfile -t mods < <(released_modules "$tree/versions.yaml" | cut -d' ' -f1)
    git archive "$commit" -- "${mods[@]}" | tar -x -C "$tree" || return 1
  fi
  mapfile -t mods < <(released_modules "$tree/versions.yaml" | cut -d' ' -f1)
  {
    echo "go $(go env GOVERSION | sed 's/^go//')"
    echo
    echo "use ./$2"
    for m in "${mods[@]}"; do
      [ "$m" != "$2" ] && [ -f "$tree/$m/go.mod" ] && echo "replace $MODPREFIX/$m => ./$m"
    done
  } >"$tree/$2.work"
  echo "$tree"
}

declare -A base_of api_of result_of
failed=0
for dir in "${modules[@]}"; do
  ver=${version[$dir]}
  mod="$MODPREFIX/$dir"
  base=$(module_tags . "$dir" | tail -n1)
  echo "==> $dir"
  base_of[$dir]=${base:--}
  if [ -z "$base" ]; then
    echo "$dir: no previous tag ($dir/v*): nothing to compare, skipped"
    api_of[$dir]=- result_of[$dir]=skipped
    continue
  fi
  if [ "$(ver_cmp "$base" "$ver")" = 1 ]; then
    echo "$dir: FAIL: versions.yaml says $ver, below the tag $dir/$base"
    api_of[$dir]=- result_of[$dir]=FAIL failed=1
    continue
  fi
  tree=$(old_tree "$dir/$base" "$dir") && build_apidiff &&
    (cd "$tree/$dir" && GOWORK="$tree/$dir.work" "$apidiff" -m -w "$tmp/$dir.old" "$mod") &&
    (cd "$ROOT/$dir" && "$apidiff" -m -w "$tmp/$dir.new" "$mod") &&
    report=$("$apidiff" -m "$tmp/$dir.old" "$tmp/$dir.new" 2>&1) || {
    echo "$dir: FAIL: could not compare with $dir/$base"
    api_of[$dir]=- result_of[$dir]=FAIL failed=1
    continue
  }
  incompatible=0 compatible=0
  grep -q '^Incompatible changes:' <<<"$report" && incompatible=1
  grep -q '^Compatible changes:' <<<"$report" && compatible=1
  bumped=0
  [ "$(ver_cmp "$base" "$ver")" = -1 ] && bumped=1
  if [ $bumped = 1 ]; then echo "$dir: $dir/$base -> $ver (versions.yaml)"; else echo "$dir: $dir/$base, versions.yaml $ver (no new version yet)"; fi
  [ -z "$report" ] || sed 's/^/    /' <<<"$report"
  problems=()
  minor_up="v$(ver_major "$base").$(($(ver_minor "$base") + 1)).0"
  if [ $incompatible = 1 ]; then
    api_of[$dir]=incompatible
    if [ "$(ver_major "$base")" != 0 ]; then
      problems+=("incompatible changes in a v$(ver_major "$base") module: a new major version is a new module path ($mod/v$(($(ver_major "$base") + 1)))")
    elif [ "$(ver_cmp "$ver" "$minor_up")" = -1 ]; then
      problems+=("incompatible changes need $minor_up or later (pre-1.0: a new minor version) in versions.yaml, which says $ver")
    fi
  elif [ $compatible = 1 ]; then
    api_of[$dir]=compatible
    if [ $bumped = 1 ] && [ "$(ver_major "$base")" != 0 ] && [ "$(ver_cmp "$ver" "$minor_up")" = -1 ]; then
      problems+=("compatible changes need $minor_up or later (a new minor version) in versions.yaml, which says $ver")
    fi
  else
    api_of[$dir]=none
    echo "$dir: no API change since $dir/$base"
  fi
  if [ "${api_of[$dir]}" != none ]; then
    [ $bumped = 1 ] || echo "$dir: note: the API changed since $dir/$base; versions.yaml must name a new version before the next release ($minor_up suggested)"
    added=$(git diff --numstat "refs/tags/$dir/$base" -- "$dir/CHANGELOG.md" | awk '{ n += $1 } END { print n + 0 }')
    if [ "$added" = 0 ]; then
      problems+=("the API changed but $dir/CHANGELOG.md has no new entry since $dir/$base")
    elif [ $bumped = 1 ] && ! grep -Eq "^#+ .*${ver//./\\.}([^0-9.]|$)" "$dir/CHANGELOG.md"; then
      problems+=("$dir/CHANGELOG.md has no heading for $ver (\"## $ver\")")
    fi
  fi
  if [ ${#problems[@]} -gt 0 ]; then
    for p in "${problems[@]}"; do echo "$dir: FAIL: $p"; done
    result_of[$dir]=FAIL failed=1
  else
    echo "$dir: ok"
    result_of[$dir]=ok
  fi
done

echo
echo "API check (apidiff against the last tag; skipped = never tagged):"
printf '  %-12s %-10s %-14s %-13s %s\n' module "last tag" "versions.yaml" "API changes" result
for dir in "${modules[@]}"; do
  printf '  %-12s %-10s %-14s %-13s %s\n' "$dir" "${base_of[$dir]}" "${version[$dir]}" "${api_of[$dir]}" "${result_of[$dir]}"
done
if [ $failed = 1 ]; then echo "apicheck: FAIL"; exit 1; fi
echo "apicheck: ok"
