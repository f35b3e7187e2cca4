#!/usr/bin/env bash
# Cuts a release: tags every module of versions.yaml whose version has no tag yet. Used by hand for a
# real release and by scripts/release-check.sh (`make release-check`) in a scratch clone.
#
#   scripts/release.sh [--repo REPO] [--rev REV]
#
# REPO is the repository to release from (default: this checkout), REV the commit (default HEAD;
# uncommitted changes are not released). First scripts/apicheck.sh checks each new version against
# the module's API changes since its last tag and its CHANGELOG.
#
# On main every go.mod carries `replace <sibling> => ../<sibling>` lines (for GOWORK=off builds before
# anything is published), and `go install pkg@version` refuses a module whose go.mod has replace
# directives. So the tags do not point at REV but at a release commit, a child of REV made here, in
# which every released module's go.mod:
#   - has no replace lines to siblings (any other replace or exclude line is an error),
#   - requires each sibling at its versions.yaml version, which must be tagged already or be part of
#     this release,
#   - has a go.sum with the siblings' checksums (filled by `go mod tidy`, module by module in
#     dependency order: luakit's tag is served before lock is tidied).
# Every released module is then vetted with GOWORK=off at the release commit, fetching its siblings
# from the new tags (through a local clone served as the git remote, never a module proxy); its go.sum
# must match. The release commit is reachable only from its tags: main keeps its replace lines.
#
# The tags (annotated, <dir>/<version>) and the release commit are fetched into REPO; nothing is
# pushed. The last line printed is the push command. Work files: $COORDKIT_RELEASE_CACHE (default
# ~/.cache/coordkit/release).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=release/lib.sh
. "$here/release/lib.sh"

usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
repo=$(cd "$here/.." && pwd)
rev=HEAD
while [ $# -gt 0 ]; do
  case $1 in
    --repo) repo=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done

fail() { echo "release: $*" >&2; exit 1; }
start=$SECONDS
repo=$(git -C "$repo" rev-parse --show-toplevel)
base=$(git -C "$repo" rev-parse --verify "$rev^{commit}") || fail "no commit $rev in $repo"
if [ "$rev" = HEAD ] && [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "release: note: uncommitted changes in $repo are not part of the release (HEAD is)"
fi
[ -n "${COORDKIT_RELEASE_LOCKED:-}" ] || release_lock
git_identity

work="$RELEASE_CACHE/work"
rm -rf "$work"
git clone -q --no-checkout "$repo" "$work"
git -C "$work" checkout -q -B release "$base"
cd "$work"
echo "release: from $(git log -1 --format='%h %s' "$base" | cut -c1-100)"

check_module_lists . || fail "fix versions.yaml first"

declare -A version tagged
pending=()
while read -r dir ver; do
  is_semver "$ver" || fail "versions.yaml: $dir has version '$ver', not vMAJOR.MINOR.PATCH"
  [ "$(sed -n 's/^module //p' "$dir/go.mod")" = "$MODPREFIX/$dir" ] || fail "$dir/go.mod does not declare module $MODPREFIX/$dir"
  version[$dir]=$ver
  latest=$(module_tags "$repo" "$dir" | tail -n1)
  if [ -n "$latest" ] && [ "$(ver_cmp "$latest" "$ver")" = 1 ]; then
    fail "versions.yaml says $dir $ver, but $dir/$latest is tagged already"
  fi
  if [ "$latest" = "$ver" ] || git -C "$repo" rev-parse -q --verify "refs/tags/$dir/$ver" >/dev/null; then
    tagged[$dir]=1
  else
    pending+=("$dir")
  fi
done < <(released_modules versions.yaml)

if [ ${#pending[@]} -eq 0 ]; then
  echo "release: nothing to release: every version in versions.yaml is tagged"
  exit 0
fi
is_pending() { local p; for p in "${pending[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
echo "release: ${#pending[@]} module(s) to tag: $(for d in "${pending[@]}"; do printf '%s/%s ' "$d" "${version[$d]}"; done)"

# Each new version must fit its API changes since the module's last tag (and have a CHANGELOG entry).
if ! scripts/apicheck.sh "${pending[@]}" | sed 's/^/  /'; then
  fail "the API check failed: fix versions.yaml or the CHANGELOG first"
fi

# The go.mod edits: no replace lines to siblings; siblings required at their versions.yaml versions.
declare -A deps
for dir in "${pending[@]}"; do
  while read -r old; do
    go mod edit -dropreplace="$old" "$dir/go.mod"
  done < <(go mod edit -json "$dir/go.mod" | awk -v p="\"$MODPREFIX/" '/"Old":/ { o = 1 } o && /"Path":/ { if (index($2, p) == 1) { gsub(/[",]/, "", $2); print $2 } o = 0 }')
  if go mod edit -json "$dir/go.mod" | grep -q '"Old":\|"Exclude": \['; then
    fail "$dir/go.mod has replace lines to non-sibling modules or exclude lines: go install refuses them, consumers ignore them"
  fi
  deps[$dir]=""
  while read -r sib have; do
    want=${version[$sib]:-}
    [ -n "$want" ] || fail "$dir requires $MODPREFIX/$sib, which versions.yaml does not release"
    if [ -z "${tagged[$sib]:-}" ] && ! is_pending "$sib"; then
      fail "$dir requires $sib $want, which is neither tagged nor part of this release"
    fi
    if [ "$have" != "$want" ]; then
      echo "release: $dir: require $sib $have -> $want (versions.yaml)"
      go mod edit -require="$MODPREFIX/$sib@$want" "$dir/go.mod"
    fi
    if is_pending "$sib"; then deps[$dir]+=" $sib"; fi
  done < <(sibling_requires "$dir/go.mod")
done

# go.sum: tidy in dependency order, each layer's modules tagged (in the work clone, which the go command
# fetches from) before the next layer is tidied. A module's checksum covers only its own files, so
# the tags can later move to the final commit, whose tree is the same.
use_remote "$work"
forget_coordkit
declare -A done_
layers=()
remaining=("${pending[@]}")
while [ ${#remaining[@]} -gt 0 ]; do
  layer=() next=()
  for dir in "${remaining[@]}"; do
    ready=1
    for d in ${deps[$dir]}; do [ -n "${done_[$d]:-}" ] || ready=0; done
    if [ $ready = 1 ]; then layer+=("$dir"); else next+=("$dir"); fi
  done
  [ ${#layer[@]} -gt 0 ] || fail "require cycle among: ${remaining[*]}"
  for dir in "${layer[@]}"; do
    (cd "$dir" && go mod tidy) || fail "$dir: go mod tidy failed at the release commit"
  done
  git add -A "${layer[@]}"
  git diff --cached --quiet || git commit -q -m "release layer: ${layer[*]}"
  for dir in "${layer[@]}"; do git tag -f "$dir/${version[$dir]}" >/dev/null; done
  for dir in "${layer[@]}"; do done_[$dir]=1; done
  layers+=("${layer[*]}")
  remaining=("${next[@]}")
done
for dir in "${pending[@]}"; do git add -A "$dir"; done
git diff --cached --quiet || git commit -q -m "release: remaining edits"

tags=()
for dir in "${pending[@]}"; do tags+=("$dir/${version[$dir]}"); done
msg="Release ${tags[*]}

The go.mod files of these modules require their siblings' tagged versions
and carry no replace lines, so that go get and go install resolve them by
tag. This commit is reachable from its tags only; main keeps the replace
lines that GOWORK=off builds in the repository need."
final=$(git commit-tree "HEAD^{tree}" -p "$base" -m "$msg")
git checkout -q --detach "$final"
for t in "${tags[@]}"; do git tag -f -a -m "${t%/*} ${t##*/}" "$t" "$final" >/dev/null; done
echo "release: release commit $(git rev-parse --short "$final") (child of $(git rev-parse --short "$base")), layers: $(printf '[%s] ' "${layers[@]}")"

# Verify: every released module builds with GOWORK=off at the release commit, its siblings fetched
# afresh from the final tags (go.sum checked against what is downloaded).
forget_coordkit
verify_failed=0
for dir in "${pending[@]}"; do
  t0=$SECONDS
  if (cd "$dir" && go mod tidy -diff && go vet -p 2 ./...); then
    echo "release: $dir ${version[$dir]}: tidy and vetted with GOWORK=off at the release commit in $(dur $((SECONDS - t0)))"
  else
    echo "release: $dir ${version[$dir]}: FAILED at the release commit (GOWORK=off, siblings from their tags)"
    verify_failed=1
  fi
done
forget_coordkit
[ $verify_failed = 0 ] || fail "not tagged in $repo: fix the failures above (the work clone stays in $work)"

refspecs=()
for t in "${tags[@]}"; do refspecs+=("refs/tags/$t:refs/tags/$t"); done
git -C "$repo" fetch -q "$work" "${refspecs[@]}"
echo "release: tagged in $repo in $(dur $((SECONDS - start))): ${tags[*]}"
echo "release: publish with: git push origin ${tags[*]}"
