package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

const defaultClusterNodeTimeout = 2000 * time.Millisecond

// WithReplicas gives every primary of a process-backend cluster n replicas (joined with CLUSTER
// REPLICATE): WithReplicas(1) starts 3 primaries and 3 replicas. Cluster.Nodes lists the
// primaries first, then the replicas (replica k replicates primary k%3). LaunchCluster then also
// waits until every replica's link to its primary is up. Ignored by standalone servers and the
// external backend. Default 0.
func WithReplicas(n int) Option {
	return func(c *config) { c.replicas = max(n, 0) }
}

// WithNodeTimeout sets the process-backend cluster's --cluster-node-timeout (millisecond
// resolution; default 2s). A primary is considered failed after about this long, and a replica
// takes over within roughly 1–2 more seconds. Values below 100ms are raised to 100ms.
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) { c.nodeTimeout = d }
}

func (c *config) clusterNodeTimeout() time.Duration {
	switch {
	case c.nodeTimeout <= 0:
		return defaultClusterNodeTimeout
	case c.nodeTimeout < 100*time.Millisecond:
		return 100 * time.Millisecond
	default:
		return c.nodeTimeout
	}
}

// nodeID returns the node's cluster id (CLUSTER MYID).
func nodeID(ctx context.Context, addr string) (string, error) {
	reply, err := rawDo(ctx, addr, 2*time.Second, "CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("CLUSTER MYID on %s: %w", addr, err)
	}
	id, _ := reply.(string)
	if id == "" {
		return "", fmt.Errorf("CLUSTER MYID on %s: empty reply", addr)
	}
	return id, nil
}

// attachReplicas makes Nodes[3+k] a replica of Nodes[k%3] (retrying CLUSTER REPLICATE until the
// replica has learnt the primary's id by gossip) and waits until every replica's link is up.
func (c *Cluster) attachReplicas(ctx context.Context) error {
	ids := make([]string, clusterPrimaries)
	for i, n := range c.Nodes[:clusterPrimaries] {
		id, err := nodeID(ctx, n.Addr)
		if err != nil {
			return err
		}
		ids[i] = id
	}
	for k, r := range c.Nodes[clusterPrimaries:] {
		id := ids[k%clusterPrimaries]
		for {
			_, err := rawDo(ctx, r.Addr, 2*time.Second, "CLUSTER", "REPLICATE", id)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CLUSTER REPLICATE %s on %s: %v (%w)", id, r.Addr, err, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	for _, r := range c.Nodes[clusterPrimaries:] {
		for {
			reply, err := rawDo(ctx, r.Addr, 2*time.Second, "INFO", "replication")
			s, _ := reply.(string)
			if err == nil && parseInfo(s)["master_link_status"] == "up" {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("replica %s: link to its primary not up (%w)", r.Addr, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// KeySlot returns the cluster hash slot of key (CRC16 of the key, or of its {hash tag}, mod 16384).
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % ClusterSlots
}

// running reports the nodes whose process runs (all nodes on the external backend; on the
// container backend, the containers neither killed nor disconnected from the cluster's network).
func (c *Cluster) running() []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		if k, ok := n.inst.(*ctr); ok {
			if !k.down(c.Network) {
				out = append(out, n)
			}
			continue
		}
		if n.Backend != BackendProcess || n.PID() != 0 {
			out = append(out, n)
		}
	}
	return out
}

func (c *Cluster) nodeByAddr(host string, port int64) *Server {
	want := net.JoinHostPort(host, strconv.FormatInt(port, 10))
	for _, n := range c.Nodes {
		if n.Addr == want {
			return n
		}
	}
	return nil
}

// slotOwners reads CLUSTER SLOTS from addr: slot → primary (nil when the slot is not served or
// its primary is not one of Nodes).
func (c *Cluster) slotOwners(ctx context.Context, addr string) ([]*Server, error) {
	reply, err := rawDo(ctx, addr, 2*time.Second, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS on %s: %w", addr, err)
	}
	ranges, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("CLUSTER SLOTS on %s: unexpected reply %T", addr, reply)
	}
	owners := make([]*Server, ClusterSlots)
	for _, r := range ranges {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS on %s: malformed range", addr)
		}
		lo, ok1 := e[0].(int64)
		hi, ok2 := e[1].(int64)
		m, ok3 := e[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(m) < 2 || lo < 0 || hi >= ClusterSlots || lo > hi {
			return nil, fmt.Errorf("CLUSTER SLOTS on %s: malformed range", addr)
		}
		host, _ := m[0].(string)
		port, _ := m[1].(int64)
		n := c.nodeByAddr(host, port)
		for s := lo; s <= hi; s++ {
			owners[s] = n
		}
	}
	return owners, nil
}

// PrimaryOf returns the node serving slot, as the first running node that answers CLUSTER SLOTS
// sees it. Errors: slot out of range, no node answers (bounded by ctx), or nobody serves the slot.
func (c *Cluster) PrimaryOf(ctx context.Context, slot int) (*Server, error) {
	if slot < 0 || slot >= ClusterSlots {
		return nil, fmt.Errorf("testkit: slot %d out of range", slot)
	}
	var errs []error
	for _, n := range c.running() {
		owners, err := c.slotOwners(ctx, n.Addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if owners[slot] == nil {
			return nil, fmt.Errorf("testkit: slot %d has no known primary (per %s)", slot, n.Addr)
		}
		return owners[slot], nil
	}
	return nil, fmt.Errorf("testkit: no cluster node answers: %w", errors.Join(errs...))
}

// KillPrimary kills (SIGKILL, Server.Kill) the primary serving slot and returns it. Its replica
// (WithReplicas) takes over after about the node timeout; wait for that with WaitFailover.
// Process and container backends: the external backend returns an error wrapping ErrUnsupported.
func (c *Cluster) KillPrimary(ctx context.Context, slot int) (*Server, error) {
	n, err := c.PrimaryOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	if err := n.Kill(); err != nil {
		return nil, err
	}
	return n, nil
}

// WaitFailover blocks until the cluster has healed after nodes were killed: every running node
// reports cluster_state:ok and a CLUSTER SLOTS that covers all 16384 slots, each served by a
// running node. It polls every 100ms and returns ctx's error (with the last reason) when ctx ends
// first — as it will when a killed primary had no replica. Expect a few seconds (node timeout +
// election).
func (c *Cluster) WaitFailover(ctx context.Context) error {
	var last error
	for {
		last = c.healed(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: cluster not healed: %v (%w)", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) healed(ctx context.Context) error {
	live := c.running()
	alive := map[*Server]bool{}
	for _, n := range live {
		alive[n] = true
	}
	for _, n := range live {
		reply, err := rawDo(ctx, n.Addr, 2*time.Second, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr, err)
		}
		s, _ := reply.(string)
		if st := parseInfo(s)["cluster_state"]; st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.Addr, st)
		}
		owners, err := c.slotOwners(ctx, n.Addr)
		if err != nil {
			return err
		}
		for slot, o := range owners {
			if o == nil || !alive[o] {
				return fmt.Errorf("%s: slot %d not served by a running node", n.Addr, slot)
			}
		}
	}
	return nil
}

// MigrateOptions configures slot migrations.
type MigrateOptions struct {
	Batch   int           // keys per MIGRATE (and per CLUSTER GETKEYSINSLOT); default 100
	Timeout time.Duration // MIGRATE's own timeout; default 5s
}

// Migration is a slot migration begun by BeginMigration: the source is MIGRATING and the
// destination IMPORTING the slot. While it lasts the source answers a command for a key of the
// slot it no longer holds with -ASK <slot> <dest>, and the destination serves such a key only
// after ASKING.
type Migration struct {
	Slot     int
	From, To *Server

	c              *Cluster
	fromID, toID   string
	batch          int
	migrateTimeout time.Duration
}

// MigrateSlot moves slot to the primary to (a node of c): BeginMigration, then Finish. Keys keep
// their values and TTLs (MIGRATE). Blocks until done, bounded by ctx.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Server, opts MigrateOptions) error {
	m, err := c.BeginMigration(ctx, slot, to, opts)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}

// BeginMigration starts moving slot to the primary to, with the standard first steps:
// CLUSTER SETSLOT <slot> IMPORTING <source id> on to, then CLUSTER SETSLOT <slot> MIGRATING
// <to id> on the current owner. No key moves yet (see MoveKeys, Finish). Errors: to is not a
// node of c, already serves the slot, or a command fails; the external backend returns an error
// wrapping ErrUnsupported (testkit does not reshape a cluster it does not own).
func (c *Cluster) BeginMigration(ctx context.Context, slot int, to *Server, opts MigrateOptions) (*Migration, error) {
	if to == nil || to.Backend == BackendExternal {
		return nil, unsupportedOn(BackendExternal, "slot migration")
	}
	if c.nodeIndex(to) < 0 {
		return nil, fmt.Errorf("testkit: %s is not a node of this cluster", to.Addr)
	}
	from, err := c.PrimaryOf(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("testkit: %s already serves slot %d", to.Addr, slot)
	}
	m := &Migration{Slot: slot, From: from, To: to, c: c, batch: opts.Batch, migrateTimeout: opts.Timeout}
	if m.batch <= 0 {
		m.batch = 100
	}
	if m.migrateTimeout <= 0 {
		m.migrateTimeout = 5 * time.Second
	}
	if m.fromID, err = nodeID(ctx, from.Addr); err != nil {
		return nil, fmt.Errorf("testkit: %w", err)
	}
	if m.toID, err = nodeID(ctx, to.Addr); err != nil {
		return nil, fmt.Errorf("testkit: %w", err)
	}
	if err := m.restate(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (c *Cluster) nodeIndex(s *Server) int {
	for i, n := range c.Nodes {
		if n == s {
			return i
		}
	}
	return -1
}

// MoveKeys moves the given keys of the slot from the source to the destination with one MIGRATE
// (keys the source does not hold are skipped). Errors: a key outside the slot, or MIGRATE fails.
func (m *Migration) MoveKeys(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if KeySlot(k) != m.Slot {
			return fmt.Errorf("testkit: key %q is in slot %d, not %d", k, KeySlot(k), m.Slot)
		}
	}
	host, port, err := net.SplitHostPort(m.To.Addr)
	if err != nil {
		return err
	}
	args := append([]string{"MIGRATE", host, port, "", "0", strconv.FormatInt(m.migrateTimeout.Milliseconds(), 10), "KEYS"}, keys...)
	for attempt := 1; ; attempt++ {
		_, err := m.From.Do(ctx, args...)
		if err == nil {
			return nil
		}
		// The destination answered MOVED: it did not count the slot as importing at that moment
		// (seen once on a loaded Valkey 9.1.2 Cluster, in the round after the slot had moved the other
		// way). Restate both migration states and try again, a bounded number of times.
		if !strings.Contains(err.Error(), "MOVED") || attempt == migrateAttempts {
			return fmt.Errorf("testkit: MIGRATE from %s to %s: %w", m.From.Addr, m.To.Addr, err)
		}
		if err := m.restate(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: MIGRATE from %s to %s: %w (after %w)", m.From.Addr, m.To.Addr, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// awaitEpoch polls CLUSTER INFO until the destination's cluster_current_epoch is at least the
// source's cluster_my_epoch (its config epoch), bounded by ctx.
func (m *Migration) awaitEpoch(ctx context.Context) error {
	epoch := func(n *Server, field string) (int64, error) {
		reply, err := rawDo(ctx, n.Addr, 2*time.Second, "CLUSTER", "INFO")
		if err != nil {
			return 0, fmt.Errorf("testkit: %s: CLUSTER INFO: %w", n.Addr, err)
		}
		s, _ := reply.(string)
		return strconv.ParseInt(parseInfo(s)[field], 10, 64)
	}
	for {
		src, err := epoch(m.From, "cluster_my_epoch")
		if err != nil {
			return err
		}
		dst, err := epoch(m.To, "cluster_current_epoch")
		if err != nil {
			return err
		}
		if dst >= src {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: slot %d: %s knows epoch %d, below the source's %d: %w", m.Slot, m.To.Addr, dst, src, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// migrateAttempts bounds MoveKeys' MIGRATEs of one batch when the destination answers MOVED.
const migrateAttempts = 20

// restate sends the migration's two CLUSTER SETSLOT commands (IMPORTING on the destination, then
// MIGRATING on the source): BeginMigration's first steps, which MoveKeys repeats (both are idempotent
// while the migration lasts).
func (m *Migration) restate(ctx context.Context) error {
	s := strconv.Itoa(m.Slot)
	if _, err := m.To.Do(ctx, "CLUSTER", "SETSLOT", s, "IMPORTING", m.fromID); err != nil {
		return fmt.Errorf("testkit: CLUSTER SETSLOT %s IMPORTING on %s: %w", s, m.To.Addr, err)
	}
	if _, err := m.From.Do(ctx, "CLUSTER", "SETSLOT", s, "MIGRATING", m.toID); err != nil {
		return fmt.Errorf("testkit: CLUSTER SETSLOT %s MIGRATING on %s: %w", s, m.From.Addr, err)
	}
	return nil
}

// Finish moves the slot's remaining keys (CLUSTER GETKEYSINSLOT + MIGRATE, in batches) and
// assigns the slot with CLUSTER SETSLOT <slot> NODE <dest id> on the destination, then the
// source, then every other running node, and waits until every running node's CLUSTER SLOTS
// names the destination. Afterwards the source answers the slot's keys with -MOVED. Blocks until
// done, bounded by ctx.
func (m *Migration) Finish(ctx context.Context) error {
	s := strconv.Itoa(m.Slot)
	for {
		msg, err := m.From.Do(ctx, "CLUSTER", "GETKEYSINSLOT", s, strconv.Itoa(m.batch))
		if err != nil {
			return fmt.Errorf("testkit: CLUSTER GETKEYSINSLOT on %s: %w", m.From.Addr, err)
		}
		keys, err := msg.AsStrSlice()
		if err != nil {
			return fmt.Errorf("testkit: CLUSTER GETKEYSINSLOT on %s: %w", m.From.Addr, err)
		}
		if len(keys) == 0 {
			break
		}
		if err := m.MoveKeys(ctx, keys...); err != nil {
			return err
		}
	}
	// SETSLOT NODE on the destination bumps its config epoch above the highest it knows, without
	// consensus, so that its claim beats the source's in gossip. Two things can spoil that, and then
	// the source's gossip takes the slot back (and the destination drops the keys it received): the
	// destination no longer counts the slot as importing (seen once: it then does not bump), or it
	// has not yet heard the source's epoch (the source bumped it when it took the slot last time, and
	// the previous Finish waited only for the slot's owner, which SETSLOT NODE sets on every node
	// directly). So restate the migration and wait until the destination knows the source's epoch.
	if err := m.restate(ctx); err != nil {
		return err
	}
	if err := m.awaitEpoch(ctx); err != nil {
		return err
	}
	for _, n := range []*Server{m.To, m.From} {
		if _, err := n.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", m.toID); err != nil {
			return fmt.Errorf("testkit: CLUSTER SETSLOT %s NODE on %s: %w", s, n.Addr, err)
		}
	}
	for _, n := range m.c.running() {
		if n != m.To && n != m.From {
			_, _ = n.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", m.toID)
		}
	}
	// Wait until every running node's CLUSTER SLOTS names the destination, so that clients and
	// PrimaryOf see one owner whichever node they ask (gossip can lag on a loaded machine).
	// Only the other nodes are told again: were the destination itself to lose the slot, it would
	// already have dropped the migrated keys, and assigning the slot back would hide that loss.
	for {
		var disagree []string
		for _, n := range m.c.running() {
			owners, err := m.c.slotOwners(ctx, n.Addr)
			switch {
			case err != nil:
				disagree = append(disagree, err.Error())
			case owners[m.Slot] != m.To:
				seen := "nobody"
				if o := owners[m.Slot]; o != nil {
					seen = o.Addr
				}
				disagree = append(disagree, fmt.Sprintf("%s names %s", n.Addr, seen))
			default:
				continue
			}
			if n != m.To && n != m.From {
				_, _ = n.Do(ctx, "CLUSTER", "SETSLOT", s, "NODE", m.toID)
			}
		}
		if len(disagree) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: slot %s: nodes do not agree on the new owner %s (%s): %w",
				s, m.To.Addr, strings.Join(disagree, "; "), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
