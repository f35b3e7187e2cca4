#!/usr/bin/env bash
# Runs one or more checks in every given Go module and prints a module x step summary. Called by the
# Makefile; usable by hand:
#
#   scripts/modules.sh STEP[,STEP...] MODULE...
#
# Steps (each runs inside the module's directory):
#   ws           go vet + go test $GOTESTFLAGS ./...   in the go.work workspace
#   off          the same with GOWORK=off               (catches a require that only go.work provides);
#                in integration: go vet, then go test -run '^$' (builds and starts every test binary, no
#                test runs: the suites ran in the workspace step, on the same sibling sources)
#   vet          go vet ./...
#   gofmt        gofmt -l . (fails when any file needs formatting)
#   staticcheck  go tool staticcheck ./...              (pinned in tools/go.mod, visible through go.work)
#   doccheck     go tool revive (exported rule only)    (pinned in tools/go.mod; released modules in `make lint`)
#   tidy         GOWORK=off go mod tidy -diff           (fails on any go.mod/go.sum difference; edits nothing)
#   download     GOWORK=off go mod download
#   wsdownload   go list -deps -test ./... in the workspace (downloads what the packages import)
#   fuzz         every FuzzXxx in the module for $FUZZTIME each
#   bench        go test -run='^$' -bench=. -benchmem ./...
#
# A module without .go files yet is reported as "none" for steps that need packages (go vet / go test
# fail with "no packages" there). Every step runs even after a failure, so the summary is complete, with
# each step's duration and each column's total; the exit status is 1 when any step failed.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) PATH="$PATH:/usr/local/go/bin" ;; esac

GOTESTFLAGS=${GOTESTFLAGS:--race -count=1 -p 2 -timeout 20m}
# The integration suites run one package at a time (each already runs two targets at once): with two
# packages at once, four servers' scenarios shared the 2 cores and timing-sensitive scenarios of older
# suites failed now and then. INTEGRATION_P overrides. -parallel lets a suite that mostly waits run more
# targets at once (matrix.SetParallelTargets; the ownership suite runs four); matrix.TakeSlot keeps every
# other suite at two.
INTEGRATION_P=${INTEGRATION_P:-1}
INTEGRATION_PARALLEL=${INTEGRATION_PARALLEL:-4}
FUZZTIME=${FUZZTIME:-10s}

[ $# -ge 1 ] || { sed -n '2,24p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || { echo "modules.sh: no modules selected (check ONLY=...)" >&2; exit 2; }
IFS=, read -r -a steps <<<"$1"; shift
modules=("$@")

has_go() { [ -n "$(find "$1" -name '*.go' -not -path '*/testdata/*' -print -quit)" ]; }

# The integration module's tests run through tools/cmd/testmatrix, which prints what go test would and
# adds the suite x server table; the tables are repeated at the end of the summary.
matrix_tables=$(mktemp "${TMPDIR:-/tmp}/coordkit-matrix.XXXXXX")
testmatrix=""
cleanup() { rm -f "$matrix_tables"; [ -z "$testmatrix" ] || rm -rf "$(dirname "$testmatrix")"; }
trap cleanup EXIT
build_testmatrix() {
  [ -n "$testmatrix" ] && return 0
  local dir; dir=$(mktemp -d "${TMPDIR:-/tmp}/coordkit-testmatrix.XXXXXX")
  (cd "$ROOT/tools" && GOWORK=off go build -o "$dir/testmatrix" ./cmd/testmatrix) || return 1
  testmatrix="$dir/testmatrix"
}
in_integration() { [ "$(basename "$PWD")" = integration ]; }
# run_tests <title>: go test $GOTESTFLAGS ./... in the current module (honouring GOWORK).
run_tests() {
  if in_integration; then
    build_testmatrix || return 1
    go test -json $GOTESTFLAGS -p "$INTEGRATION_P" -parallel "$INTEGRATION_PARALLEL" ./... 2>&1 | "$testmatrix" -title "$1" -append-table "$matrix_tables"
  else
    go test $GOTESTFLAGS ./...
  fi
}

step_ws()          { go vet -p 2 ./... && run_tests "workspace"; }
# The integration suites run once, in the workspace step: what GOWORK=off adds (the module's own go.mod
# must resolve every import) shows when building, so its GOWORK=off step builds, links and starts every
# test binary without running a test (no -race: linking race binaries is slower and proves no more).
step_off() {
  GOWORK=off go vet -p 2 ./... || return 1
  if in_integration; then GOWORK=off go test -count=1 -run '^$' ./...; else GOWORK=off run_tests "GOWORK=off"; fi
}
step_vet()         { go vet -p 2 ./...; }
step_staticcheck() { go tool staticcheck ./...; }
# Every exported identifier has a doc comment starting with its name (revive's exported rule, pinned in
# tools/go.mod, configured in tools/revive.toml).
step_doccheck()    { go tool revive -config "$ROOT/tools/revive.toml" ./...; }
step_download()    { GOWORK=off go mod download; }
step_wsdownload()  { go list -deps -test ./... >/dev/null; }
step_tidy()        { GOWORK=off go mod tidy -diff; }
step_bench()       { go test -run='^$' -bench=. -benchmem ./...; }
step_gofmt() {
  local out; out=$(gofmt -l .) || return 1
  [ -z "$out" ] && return 0
  echo "files not gofmt-ed (run gofmt -w):"; echo "$out"; return 1
}
step_fuzz() {
  local found="" file dir name
  while IFS= read -r file; do
    dir=$(dirname "$file")
    for name in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
      found=1
      echo "--- $dir $name ($FUZZTIME)"
      go test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" "./$dir" || return 1
    done
  done < <(find . -name '*_test.go' -not -path '*/testdata/*' | sed 's|^\./||' | sort)
  [ -n "$found" ] || echo "no fuzz targets"
}

needs_packages() { case "$1" in tidy|download) return 1 ;; *) return 0 ;; esac; }

# dur <seconds>: 42s, 3m04s
dur() { if [ "$1" -lt 60 ]; then echo "${1}s"; else printf '%dm%02ds\n' $(($1 / 60)) $(($1 % 60)); fi; }

declare -A result secs
failed=0
all_start=$SECONDS
for step in "${steps[@]}"; do
  declare -F "step_$step" >/dev/null || { echo "modules.sh: unknown step '$step'" >&2; exit 2; }
  for m in "${modules[@]}"; do
    [ -f "$m/go.mod" ] || { echo "modules.sh: $m/go.mod not found" >&2; exit 2; }
    if needs_packages "$step" && ! has_go "$m"; then
      result[$m,$step]=none
      echo "==> $m: $step: no Go files yet, skipped"
      continue
    fi
    echo "==> $m: $step"
    start=$SECONDS
    if (cd "$m" && "step_$step"); then
      result[$m,$step]=ok
    else
      result[$m,$step]=FAIL
      failed=1
    fi
    secs[$m,$step]=$((SECONDS - start))
    echo "==> $m: $step: ${result[$m,$step]} in $(dur "${secs[$m,$step]}")"
  done
done

echo
echo "summary (result and duration; none = module has no Go files yet):"
printf '  %-12s' module; for step in "${steps[@]}"; do printf ' %-12s' "$step"; done; echo
for m in "${modules[@]}"; do
  printf '  %-12s' "$m"
  for step in "${steps[@]}"; do
    cell=${result[$m,$step]}
    [ "$cell" = none ] || cell="$cell $(dur "${secs[$m,$step]}")"
    printf ' %-12s' "$cell"
  done
  echo
done
printf '  %-12s' total
for step in "${steps[@]}"; do
  t=0; for m in "${modules[@]}"; do t=$((t + ${secs[$m,$step]:-0})); done
  printf ' %-12s' "$(dur "$t")"
done
echo
if [ -s "$matrix_tables" ]; then echo; cat "$matrix_tables"; fi
passed_steps=0 failed_steps=0
for m in "${modules[@]}"; do
  for step in "${steps[@]}"; do
    case "${result[$m,$step]}" in ok) passed_steps=$((passed_steps + 1)) ;; FAIL) failed_steps=$((failed_steps + 1)) ;; esac
  done
done
echo
echo "module steps: $passed_steps passed, $failed_steps failed, in $(dur $((SECONDS - all_start)))"
if [ "$failed" = 1 ]; then echo "FAIL"; exit 1; fi
echo "ok"
