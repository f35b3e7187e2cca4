#!/usr/bin/env bash
# The container pass of `make test`: integration suites again, every server in a container of an image
# built locally from the cached binaries (`make images`; nothing is pulled), on a real Docker engine.
# The process matrix (scripts/modules.sh) stays the main matrix; this pass proves the container backend:
#
#   lock, ratelimit, idempotency, ownership   every standalone target (redis70 redis8 valkey8 valkey9)
#   lock                                      one container Cluster (Valkey 9, 3 primaries, private network)
#   faults, replicaack                        the failover loop and the acknowledgement's routing on a
#                                             container Valkey 9 Cluster with one replica per primary
#   partitions                                network partitions between containers (docker network disconnect)
#
# Usage: scripts/containers.sh [go test package...]   (default: the list above)
#
# Without an engine (`docker info` fails) the pass says so and is skipped, or fails when CI=true.
# Testcontainers' reaper (Ryuk) cannot be pulled: it is disabled, and testkit removes the containers and
# networks of killed test binaries itself (testkit.SweepContainers, before its first container).
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) PATH="$PATH:/usr/local/go/bin" ;; esac

if ! out=$(docker info --format '{{.ServerVersion}}' 2>&1); then
  echo "container pass: no Docker engine answers (docker info: ${out//$'\n'/ })"
  if [ "${CI:-}" = true ]; then echo "container pass: FAIL (CI=true needs the engine)"; exit 1; fi
  echo "container pass: skipped"
  exit 0
fi
echo "container pass: Docker engine $out"

export COORDKIT_TESTKIT_BACKEND=container COORDKIT_TESTKIT_IMAGE_SOURCE=local TESTCONTAINERS_RYUK_DISABLED=true
# Sentinel groups are a process-backend target (the process matrix runs them).
export COORDKIT_SENTINELS=none
GOTESTFLAGS=${GOTESTFLAGS:--race -count=1 -p 2 -timeout 20m}

dir=$(mktemp -d "${TMPDIR:-/tmp}/coordkit-containers.XXXXXX")
trap 'rm -rf "$dir"' EXIT
(cd "$ROOT/tools" && GOWORK=off go build -o "$dir/testmatrix" ./cmd/testmatrix) || exit 1

start=$(date +%s)
failed=0
# run <title> <COORDKIT_CLUSTERS> <package...>
run() {
  local title=$1 clusters=$2 t0=$SECONDS; shift 2
  echo "==> container pass: $title: $*"
  (cd "$ROOT/integration" && COORDKIT_CLUSTERS=$clusters go test -json $GOTESTFLAGS -p 1 -parallel 4 "$@" 2>&1 \
    | "$dir/testmatrix" -title "containers: $title" -append-table "$dir/tables") || failed=1
  echo "==> container pass: $title: $((SECONDS - t0))s"
}
if [ $# -gt 0 ]; then
  run "selected" none "$@"
else
  run "standalone" none ./lock/ ./ratelimit/ ./idempotency/ ./ownership/
  run "cluster" valkey -run '^TestLock$/^valkey-cluster$' ./lock/
  run "replica acknowledgement" valkey -run '^(TestFailoverLoop|TestReplicaAckClusterRouting)$/^valkey-cluster$' ./faults/ ./replicaack/
  if [ -d integration/partitions ]; then run "partitions" none ./partitions/; fi
fi
echo
[ -s "$dir/tables" ] && cat "$dir/tables"
left=$(docker ps -aq --filter label=org.coordkit.testkit.owner 2>/dev/null | wc -l)
echo "container pass: $(( $(date +%s) - start ))s; testkit containers still present (other runs included): $left"
if [ "$failed" = 1 ]; then echo "container pass: FAIL"; exit 1; fi
echo "container pass: ok"
