# Coordkit's build entry points. `make demo` and `make test` do every set-up step themselves on a fresh
# Debian machine (see README.md). The per-module loops live in scripts/modules.sh, which prints a
# module x step summary (result and duration of each step) and fails when any step fails.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Go lives here on the project's machines; an earlier go on PATH wins.
export PATH := $(PATH):/usr/local/go/bin
# CI=true makes testkit fail (instead of skip) a test whose server is missing.
export CI

# Every module, listed once. RELEASED are the library modules (light, doc-checked); versions.yaml
# releases them and the coordctl command, each tagged <dir>/vX.Y.Z by scripts/release.sh.
RELEASED   := luakit lock lease rwlock semaphore idempotency leader latch redlock counter ratelimit otelhook
UNRELEASED := testkit integration bench demo tools coordctl
MODULES    := $(RELEASED) $(UNRELEASED)

# Servers that `make test` needs (scripts/servers.sh targets); `make demo` needs only redis70.
SERVERS ?= redis70 redis8 valkey8 valkey9
# -p 2 bounds parallel test binaries (each may start its own servers).
GOTESTFLAGS ?= -race -count=1 -p 2 -timeout 20m
FUZZTIME    ?= 10s
export GOTESTFLAGS FUZZTIME

EACH := scripts/modules.sh
# ONLY=<module...> restricts a target to those of its modules (CI runs one module per job).
ONLY ?=
pick = $(if $(ONLY),$(filter $(ONLY),$(1)),$(1))

.PHONY: help setup servers images deps test unit integration stress-counts containers release-check apicheck demo bench bench-peers lint tidy-check fuzz clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: servers deps ## install/build the servers in SERVERS and download every module's dependencies

servers: ## install/build the servers in SERVERS into ~/.cache/coordkit/servers
	@if scripts/servers.sh $(SERVERS); then \
	  :; \
	elif [ -n "$${COORDKIT_REDIS_URL:-}" ]; then \
	  echo "setup: servers not all available ($(SERVERS)); COORDKIT_REDIS_URL is set, tests use that server"; \
	elif command -v redis-server >/dev/null 2>&1; then \
	  echo "setup: servers not all available ($(SERVERS)); using $$(command -v redis-server) from PATH"; \
	  echo "setup: tests that need a missing server version are skipped (they fail when CI=true)"; \
	else \
	  echo "setup: no server available: run as root on Debian (apt-get) so scripts/servers.sh can install"; \
	  echo "setup: $(SERVERS), or put redis-server on PATH, or set COORDKIT_REDIS_URL=redis://host:port"; \
	  exit 1; \
	fi

images: servers ## build the container images of SERVERS from the cached binaries (FROM scratch; nothing is pulled)
	@cd testkit && go run ./cmd/coordkit-images $(SERVERS)

# The workspace step downloads only the modules its packages and tests import: a workspace-wide
# `go mod download` also fetches every module a peer library of the bench module merely requires
# (redsync requires valkey-go's valkeycompat, which the module proxy does not serve).
deps: ## download every module's dependencies (GOWORK=off go mod download; in the workspace, what the packages import)
	@out=$$($(EACH) download,wsdownload $(call pick,$(MODULES)) 2>&1) || { echo "$$out"; exit 1; }

test: setup images ## vet + race tests per module (workspace, GOWORK=off; integration's suites in the workspace only), tidy-check, the release rehearsal, then the container pass; prints each step's duration
	@$(EACH) ws,off,tidy $(call pick,$(MODULES))
	$(if $(ONLY),,@scripts/release-check.sh)
	$(if $(filter integration,$(call pick,$(MODULES))),@scripts/containers.sh)

unit: ## vet + race tests of the released modules, workspace and GOWORK=off (no servers needed)
	@$(EACH) ws,off $(call pick,$(RELEASED))

integration: setup ## real-server behaviour tests (integration module)
	@$(EACH) ws,off integration

# The scenarios that assert on a delta of INFO commandstats (matrix.Env.CommandsSince) on a Sentinel or
# Cluster target, where background commands (hello PUBLISH, REPLCONF, topology reads) run on their
# own: package and -run pattern, one pair a line (ratelimit's engine_exact_tables counts too, but only
# script and write commands, and takes 7 s a run). stress-counts runs each STRESS_COUNT times in a
# row on every Sentinel and Cluster target, each repetition on a new server group.
STRESS_COUNT ?= 30
STRESS_ON    := (redis|valkey)-(sentinel|cluster)
STRESS_RUNS  := \
  lock        'TestLock(Sentinel)?$$/$(STRESS_ON)/(05_cross_slot|07_handoff_release|16_handoff_tracked_client_no_option|21_cycle_commands)$$' \
  counter     'TestCounter(OnSentinel)?$$/$(STRESS_ON)/(11_one_round_trip_per_call_and_batch|12_batch_recovers_after_script_flush)$$' \
  ratelimit   'TestRateLimit(OnSentinel)?$$/$(STRESS_ON)/(engine_round_trips|limiter_inspect_read_only|deny_entries_read_only)$$' \
  idempotency 'TestIdempotency(OnSentinel)?$$/$(STRESS_ON)/(21_one_script_per_operation|27_begin_sleeps_while_held)$$' \
  leader      'TestLeader(OnSentinel)?$$/$(STRESS_ON)/explicit_keys_and_strict_slots$$' \
  coordctl    'TestCoordctl$$/$(STRESS_ON)/(read_only|bad_input)$$' \
  hooks       'TestHooks$$/$(STRESS_ON)/(rate_limit_rules|semaphore)$$' \
  rwlock      'TestRWLock$$/$(STRESS_ON)/18_wait_no_polling$$' \
  semaphore   'TestSemaphore$$/$(STRESS_ON)/(15_acquire_does_not_poll|91_refused_acquire_sends_no_cleanup)$$' \
  ownership   'TestOwnership$$/$(STRESS_ON)/11_wait_does_not_poll$$'

stress-counts: setup ## the command-count scenarios on every Sentinel and Cluster target, STRESS_COUNT (30) times in a row
	@cd integration && set -- $(STRESS_RUNS) && start=$$SECONDS && \
	while [ $$# -gt 0 ]; do \
	  t0=$$SECONDS; log=$${TMPDIR:-/tmp}/stress-counts-$$1.log; \
	  if ! CI=true COORDKIT_SENTINELS=all COORDKIT_CLUSTERS=all \
	      go test -race -v -p 1 -timeout 90m -count=$(STRESS_COUNT) -run "$$2" ./$$1/ >"$$log" 2>&1; then \
	    grep -E -- '--- FAIL|Error:|^FAIL|panic' "$$log" | head -40; \
	    echo "stress-counts: $$1 failed after $$((SECONDS - t0)) s (output: $$log)"; exit 1; \
	  fi; \
	  n=$$(grep -cE -- '--- PASS: [^ /]+/[^ /]+/[^ /]+ ' "$$log" || true); \
	  [ "$$n" -gt 0 ] || { echo "stress-counts: $$1: -run '$$2' ran no scenario"; exit 1; }; \
	  echo "stress-counts: $$1: $$n scenario runs passed in $$((SECONDS - t0)) s"; \
	  shift 2; \
	done; \
	echo "stress-counts: all passed, $(STRESS_COUNT) times each, in $$((SECONDS - start)) s"

containers: setup images ## the container pass alone: integration suites on a real Docker engine (scripts/containers.sh)
	@scripts/containers.sh

# The rehearsal needs a server with hash-field TTL (lease's README example): Redis 8 by default.
release-check: ## rehearse a release in a scratch clone: tag, go get each module alone, build and run its README example, go install coordctl (scripts/release-check.sh)
	@$(MAKE) --no-print-directory servers SERVERS=$(firstword $(filter redis8 valkey9,$(SERVERS)) redis8)
	@scripts/release-check.sh

apicheck: ## API of each released module against its last tag: version bump and CHANGELOG entry (scripts/apicheck.sh; part of lint)
	@scripts/apicheck.sh $(ONLY)

demo: ## start a throwaway Redis 7.0 and run the demo scenario
	@$(MAKE) --no-print-directory setup SERVERS=redis70
	cd demo && go run .

bench: setup ## benchmarks (bench module)
	@$(EACH) bench bench

# PEERSFLAGS are passed to the runner, e.g. PEERSFLAGS='-target=valkey9 -json peers.json'; with
# COORDKIT_REDIS_URL set it measures that server instead of starting one. -ldflags=-s=false keeps
# the symbol table that go run strips: the instruction phase (callgrind) names functions from it.
PEERSFLAGS ?=
bench-peers: setup ## Coordkit side by side with its peers on one server (bench/cmd/peers; PEERSFLAGS=...)
	cd bench && go run -ldflags=-s=false ./cmd/peers $(PEERSFLAGS)

lint: ## gofmt -l, go vet, staticcheck per module; doc comments of every exported name in the released ones; the API check
	@$(EACH) gofmt,vet,staticcheck $(call pick,$(MODULES))
	$(if $(call pick,$(RELEASED)),@$(EACH) doccheck $(call pick,$(RELEASED)))
	@scripts/apicheck.sh $(ONLY)

tidy-check: ## fail when `GOWORK=off go mod tidy` would change any go.mod/go.sum
	@$(EACH) tidy $(call pick,$(MODULES))

fuzz: ## run each luakit fuzz target for FUZZTIME (default 10s)
	@$(EACH) fuzz luakit

clean: ## remove test caches and build outputs (servers in ~/.cache/coordkit stay)
	go clean -testcache
	rm -rf bin
	find . -name '*.test' -type f -delete
