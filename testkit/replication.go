package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ReplicationInfo is the part of INFO replication that fault tests need.
type ReplicationInfo struct {
	Role             string // "master" or "slave" (as the server reports it)
	MasterReplOffset int64  // master_repl_offset: on a primary, the bytes of replication stream it produced; on a replica, the offset it processed
	SlaveReplOffset  int64  // slave_repl_offset: on a replica, the offset it processed; 0 on a primary
	MasterLinkStatus string // master_link_status on a replica ("up" / "down"); "" on a primary
	ConnectedSlaves  int    // connected_slaves on a primary
	Fields           map[string]string
}

// ReplicationOffsets runs INFO replication on s (its admin client) and returns its roles and
// offsets. Offsets are bytes of the replication stream. Errors: the server does not answer
// (bounded by ctx) or the reply is malformed.
func ReplicationOffsets(ctx context.Context, s *Server) (ReplicationInfo, error) {
	msg, err := s.Do(ctx, "INFO", "replication")
	if err != nil {
		return ReplicationInfo{}, fmt.Errorf("testkit: INFO replication on %s: %w", s.Addr, err)
	}
	txt, err := msg.ToString()
	if err != nil {
		return ReplicationInfo{}, fmt.Errorf("testkit: INFO replication on %s: %w", s.Addr, err)
	}
	return parseReplicationInfo(txt)
}

func parseReplicationInfo(txt string) (ReplicationInfo, error) {
	f := parseInfo(txt)
	ri := ReplicationInfo{Role: f["role"], MasterLinkStatus: f["master_link_status"], Fields: f}
	if ri.Role == "" {
		return ri, errors.New("testkit: INFO replication has no role")
	}
	num := func(k string) (int64, error) {
		v, ok := f[k]
		if !ok {
			return 0, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("testkit: INFO replication %s: %w", k, err)
		}
		return n, nil
	}
	var err error
	if ri.MasterReplOffset, err = num("master_repl_offset"); err != nil {
		return ri, err
	}
	if ri.SlaveReplOffset, err = num("slave_repl_offset"); err != nil {
		return ri, err
	}
	cs, err := num("connected_slaves")
	ri.ConnectedSlaves = int(cs)
	return ri, err
}

// Replicated is a primary with one replica (process backend). The replica replicates through an
// in-process TCP proxy (Link), so that a test can hold the replication stream back
// (HoldReplication) and lose writes deterministically.
type Replicated struct {
	Primary *Server // the server that takes writes; after Failover, the promoted former replica
	Replica *Server // the replica; nil after Failover
	// OldPrimary is nil until Failover; then the former primary, left as FailoverOptions said
	// (running as a second primary, paused, or killed).
	OldPrimary *Server
	Link       *Proxy // the replication link: the replica's REPLICAOF points at Link.Addr
	Target     Target

	mu        sync.Mutex
	held      bool
	closeOnce sync.Once
	closeErr  error
}

// LaunchReplicated starts a primary and a replica for target (process backend only; the external
// backend returns an error wrapping ErrUnsupported), points the replica at the primary through
// Link with REPLICAOF, and returns once the replica has synced (WaitSync). The whole start is
// bounded by ctx and by WithStartTimeout (default 15s, applied to each server's start and to the
// sync). The caller must Close it.
func LaunchReplicated(ctx context.Context, target Target, opts ...Option) (*Replicated, error) {
	b := selectBackend(false)
	if b.name() != BackendProcess {
		return nil, unsupportedOn(b.name(), "LaunchReplicated")
	}
	cfg := newConfig(defaultStartTimeout, opts)
	// Diskless full sync without the default 5s wait for more replicas; WithArgs may override it.
	cfg.args = append([]string{"--repl-diskless-sync-delay", "0"}, cfg.args...)
	r := &Replicated{Target: target}
	var errs [2]error
	var srv [2]*Server
	var wg sync.WaitGroup
	for i := range srv {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv[i], errs[i] = b.launch(ctx, target, cfg)
		}()
	}
	wg.Wait()
	r.Primary, r.Replica = srv[0], srv[1]
	if err := errors.Join(errs[:]...); err != nil {
		_ = r.Close()
		if errors.Is(errs[0], ErrUnavailable) {
			return nil, errs[0]
		}
		return nil, err
	}
	link, err := LaunchProxy(r.Primary.Addr)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	r.Link = link
	host, port, err := net.SplitHostPort(link.Addr)
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("testkit: proxy address %q: %w", link.Addr, err)
	}
	sctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	if _, err := r.Replica.Do(sctx, "REPLICAOF", host, port); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("testkit: REPLICAOF on %s: %w", r.Replica.Addr, err)
	}
	if err := r.WaitSync(sctx); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// StartReplicated is LaunchReplicated for tests: closed at t.Cleanup; skipped when the server is
// unavailable or the backend cannot replicate (fails when CI=true on ErrUnavailable), as Start.
func StartReplicated(t testing.TB, target Target, opts ...Option) *Replicated {
	t.Helper()
	r, err := LaunchReplicated(context.Background(), target, opts...)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("%v", err)
		}
		FailOrSkip(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("testkit: closing replicated %s: %v", target, err)
		}
	})
	return r
}

func unsupportedOn(backend, op string) error {
	return fmt.Errorf("testkit: %s is not supported on %s backend: %w", op, backend, ErrUnsupported)
}

// WaitSync blocks until the replica's link is up and its processed offset (slave_repl_offset)
// reaches the primary's master_repl_offset read at the start of each poll (every 10ms), i.e.
// until every write acknowledged before the call is on the replica. It returns ctx's error (with
// the last offsets) when ctx ends first, as it does while HoldReplication holds the stream back,
// and an error after Failover (no replica).
func (r *Replicated) WaitSync(ctx context.Context) error {
	if r.Replica == nil {
		return errors.New("testkit: WaitSync: no replica (after Failover)")
	}
	var last string
	for {
		p, err := ReplicationOffsets(ctx, r.Primary)
		if err == nil {
			var q ReplicationInfo
			q, err = ReplicationOffsets(ctx, r.Replica)
			if err == nil {
				if q.MasterLinkStatus == "up" && q.SlaveReplOffset >= p.MasterReplOffset {
					return nil
				}
				last = fmt.Sprintf("primary master_repl_offset %d, replica slave_repl_offset %d, master_link_status %q",
					p.MasterReplOffset, q.SlaveReplOffset, q.MasterLinkStatus)
			}
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: replica %s not in sync with %s: %s: %w", r.Replica.Addr, r.Primary.Addr, last, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// HoldReplication stops the replication stream from reaching the replica: from now on every byte
// the primary sends on the replication link is dropped by Link, so writes made afterwards are
// on the primary only (deterministically, unlike pausing the replica process, whose kernel
// socket buffer would still receive the stream and apply it on resume). Reads and the replica's
// own connection state are unaffected: the replica still reports master_link_status:up until
// repl-timeout (60s).
//
// The proxy installs the fault on its open link asynchronously, so bytes the primary sends just after
// the toxic is added can still pass. HoldReplication therefore returns only once the hold is proven:
// it publishes a probe message (replicated like a write, but it creates no key) and asks WAIT 1 100
// whether the replica acknowledged it; WAIT's GETACK travels on the held link, so 0 acknowledgements
// means the link drops what the primary sends. It blocks for those probes (about 100ms each, at most
// 5s) and fails when the hold cannot be proven.
func (r *Replicated) HoldReplication() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		return nil
	}
	if err := r.Link.DropReplies(); err != nil {
		return err
	}
	r.held = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, err := r.Primary.Do(ctx, "PUBLISH", "testkit:hold-probe", "x"); err != nil {
			return fmt.Errorf("testkit: HoldReplication probe: %w", err)
		}
		msg, err := r.Primary.Do(ctx, "WAIT", "1", "100")
		if err != nil {
			return fmt.Errorf("testkit: HoldReplication probe: %w", err)
		}
		if n, err := msg.AsInt64(); err == nil && n == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("testkit: HoldReplication: the replica still acknowledges the primary's stream: %w", ctx.Err())
		}
	}
}

// ReleaseReplication undoes HoldReplication: the held replication connection is closed, so the
// replica reconnects and catches up (partial resync from the backlog). Use WaitSync to wait for it.
func (r *Replicated) ReleaseReplication() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		return nil
	}
	r.held = false
	return r.Link.Reset()
}

// OldPrimaryAction says what Failover does to the old primary before it promotes the replica.
type OldPrimaryAction int

const (
	// KeepOldPrimary leaves the old primary running: it stays a primary (split brain) whose
	// writes nobody replicates.
	KeepOldPrimary OldPrimaryAction = iota
	// PauseOldPrimary stops it with SIGSTOP (Server.Pause); Close (or OldPrimary.Resume) resumes it.
	PauseOldPrimary
	// KillOldPrimary kills it (SIGKILL, Server.Kill); its data is gone.
	KillOldPrimary
)

// FailoverOptions configures Failover.
type FailoverOptions struct {
	OldPrimary OldPrimaryAction
}

// Failover simulates an asynchronous failover: it applies opts.OldPrimary to the primary, cuts
// the replication link, and promotes the replica with REPLICAOF NO ONE. Writes the replica had
// not received are lost: those made while HoldReplication was in effect, or simply not yet
// replicated (Failover does not wait for sync; call WaitSync first for a clean switch). Afterwards
// Primary is the promoted server, OldPrimary the former primary and Replica nil. Blocks for the
// REPLICAOF round trip (bounded by ctx); errors from the signal or the command are returned and
// leave the fields unchanged.
func (r *Replicated) Failover(ctx context.Context, opts FailoverOptions) error {
	if r.Replica == nil {
		return errors.New("testkit: Failover: no replica (already failed over)")
	}
	switch opts.OldPrimary {
	case KeepOldPrimary:
	case PauseOldPrimary:
		if err := r.Primary.Pause(); err != nil {
			return err
		}
	case KillOldPrimary:
		if err := r.Primary.Kill(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("testkit: Failover: unknown OldPrimaryAction %d", opts.OldPrimary)
	}
	if err := r.Link.Close(); err != nil {
		return err
	}
	if _, err := r.Replica.Do(ctx, "REPLICAOF", "NO", "ONE"); err != nil {
		return fmt.Errorf("testkit: REPLICAOF NO ONE on %s: %w", r.Replica.Addr, err)
	}
	r.OldPrimary, r.Primary, r.Replica = r.Primary, r.Replica, nil
	return nil
}

// Close stops the link and both servers (a paused server is resumed by its Close). Idempotent.
func (r *Replicated) Close() error {
	r.closeOnce.Do(func() {
		var errs []error
		if r.Link != nil {
			errs = append(errs, r.Link.Close())
		}
		for _, s := range []*Server{r.Primary, r.Replica, r.OldPrimary} {
			if s != nil {
				errs = append(errs, s.Close())
			}
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
