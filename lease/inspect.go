package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// Inspection is what [Leases.Inspect] reports about one hash of leases at one instant: a small value
// for operators and dashboards. It never carries an owner token. Its zero value (Exists false)
// describes an absent hash: no lease is held in it.
type Inspection struct {
	// Exists reports whether the hash exists, that is whether it holds at least one unexpired lease.
	Exists bool
	// Holders lists the hash's unexpired leases, sorted by field; empty when the hash is absent.
	Holders []Holder
}

// Holder is one named lease in an [Inspection]. It never carries the owner token.
type Holder struct {
	// Field is the lease name (the hash field), exactly as stored.
	Field string
	// Remaining is the field's remaining life on the server (HPTTL, millisecond resolution) when it was
	// read; 0 when NoExpiry.
	Remaining time.Duration
	// NoExpiry is true for a field without expiry (one not written by this package).
	NoExpiry bool
}

// Inspect reads the named leases currently in the hash at hashKey (the key prefix applies), each with
// its remaining life on the server, atomically by one script. Owner tokens are never returned. An
// absent hash is not an error (Exists false). It writes nothing and is O(N) in the number of fields.
//
// It fails before any I/O for an empty hash key (matching [ErrInvalidConfig]), with an error wrapping
// luakit.ErrUnsupported on a server without hash-field expiry, and with an error wrapping
// [ErrForeignData] when the key holds another Redis type. An uncertain read is reported as the
// client's error (it changes nothing). The result describes one instant: leases can expire or be taken
// right after. It blocks for one round trip, bounded by ctx (plus the one-time feature probe). With
// [WithHooks] it is the operation LEASE INSPECT; a rejection is returned unchanged with nothing read.
func (ls *Leases) Inspect(ctx context.Context, hashKey string) (Inspection, error) {
	ctx, sc, err := ls.cfg.own.Begin(ctx, "INSPECT")
	if err != nil {
		return Inspection{}, err
	}
	in, err := ls.inspect(ctx, hashKey)
	sc.End(err)
	return in, err
}

func (ls *Leases) inspect(ctx context.Context, hashKey string) (Inspection, error) {
	if err := luakit.ValidateKey("hash key", hashKey); err != nil {
		return Inspection{}, fmt.Errorf("lease: %w", err)
	}
	if err := ls.require(ctx); err != nil {
		return Inspection{}, err
	}
	arr, err := holdersScript.Exec(ctx, ls.client, []string{ls.cfg.keys.Key(hashKey)}, nil).ToArray()
	if err != nil {
		return Inspection{}, fmt.Errorf("lease: inspect: %w", luakit.MarkForeign(err))
	}
	hs, err := decodeHolders(arr)
	if err != nil {
		return Inspection{}, err
	}
	return Inspection{Exists: len(hs) > 0, Holders: hs}, nil
}

// decodeHolders turns the holders script's status row {1, field, pttl, ...} into Holders sorted by
// field.
func decodeHolders(arr []rueidis.RedisMessage) ([]Holder, error) {
	if len(arr) == 0 {
		return nil, fmt.Errorf("lease: inspect: empty reply")
	}
	if st, err := arr[0].AsInt64(); err != nil || st != luakit.StatusOK {
		return nil, fmt.Errorf("lease: inspect: unexpected status")
	}
	arr = arr[1:]
	if len(arr)%2 != 0 {
		return nil, fmt.Errorf("lease: inspect: odd reply of %d elements", len(arr))
	}
	out := make([]Holder, 0, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		f, err := arr[i].ToString()
		if err != nil {
			return nil, fmt.Errorf("lease: inspect: field: %w", err)
		}
		ms, err := arr[i+1].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("lease: inspect: pttl: %w", err)
		}
		h := Holder{Field: f, NoExpiry: ms < 0}
		if ms >= 0 {
			h.Remaining = time.Duration(ms) * time.Millisecond
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Holder) int { return strings.Compare(a.Field, b.Field) })
	return out, nil
}
