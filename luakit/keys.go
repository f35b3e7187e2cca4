package luakit

import (
	"errors"
	"strconv"
	"strings"
)

// SlotCount is the number of Redis Cluster hash slots; [Slot] returns a
// value in [0, SlotCount).
const SlotCount = 16384

// Keyspace maps logical key names to physical Redis keys by prepending a
// fixed prefix, the equivalent of a prefixed client view.
//
// Keys are binary-safe: the prefix and names may hold any bytes, including
// NUL and invalid UTF-8, and are concatenated without separator or
// escaping. If the prefix contains a hash tag ("{app}:"), every key built
// from it hashes to that tag's Cluster slot; this puts all keys in one slot
// (convenient for multi-key scripts, but it concentrates load on one node).
//
// The zero value is a Keyspace with no prefix. A Keyspace is a small
// immutable value, safe to copy and to use concurrently.
type Keyspace struct {
	prefix string
}

// NewKeyspace returns a Keyspace that prepends prefix to every key. An empty
// prefix is allowed and equals the zero value.
func NewKeyspace(prefix string) Keyspace { return Keyspace{prefix: prefix} }

// Prefix returns the prefix, "" for the zero value.
func (k Keyspace) Prefix() string { return k.prefix }

// Key returns the physical key for name: Prefix() + name, byte for byte.
func (k Keyspace) Key(name string) string { return k.prefix + name }

// HashTag returns the part of key that Redis Cluster hashes to choose the
// key's slot. Following the Cluster specification: if key contains a '{'
// and, after the first '{', a '}' with at least one byte between them, the
// bytes between that first '{' and the first '}' after it are hashed;
// otherwise the whole key is. So "{user1000}.following" hashes
// "user1000", "foo{}{bar}" hashes the whole key (the first tag is empty;
// later tags are never considered), "foo{{bar}}zap" hashes "{bar", and
// "foo{bar}{zap}" hashes "bar".
func HashTag(key string) string {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return key
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 { // no closing brace, or an empty tag "{}"
		return key
	}
	return key[s+1 : s+1+e]
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM variant,
// polynomial 0x1021, initial value 0) of [HashTag](key), modulo 16384.
// It matches CLUSTER KEYSLOT and works on any bytes.
func Slot(key string) uint16 {
	return crc16(HashTag(key)) & (SlotCount - 1)
}

// NamedKey pairs a physical key with its role in an operation ("lease key",
// "fence key"). The role appears in error messages; the key never does.
type NamedKey struct {
	// Role names the key's purpose for error messages, e.g. "lease key".
	Role string
	// Key is the physical Redis key (any bytes).
	Key string
}

var (
	// ErrCrossSlot is matched (via errors.Is) by every [*CrossSlotError]:
	// the keys of one multi-key operation hash to different Cluster slots.
	ErrCrossSlot = errors.New("luakit: keys hash to different Cluster slots")

	// ErrEmptyKey is wrapped by the error [ValidateKey] returns for an
	// empty key.
	ErrEmptyKey = errors.New("luakit: empty key")
)

// CrossSlotError reports keys of one multi-key operation that hash to
// different Redis Cluster slots, detected before anything is sent. Roles
// and Slots are parallel: Slots[i] is the slot of the key whose role is
// Roles[i], for every key checked. The message names roles and slots only,
// never key bytes. errors.Is(err, ErrCrossSlot) reports true.
type CrossSlotError struct {
	Roles []string
	Slots []uint16
}

// Error returns a message such as "luakit: lease key (slot 1) and fence key
// (slot 2) hash to different Cluster slots; use a common hash tag like
// {name}".
func (e *CrossSlotError) Error() string {
	var b strings.Builder
	b.WriteString("luakit: ")
	n := len(e.Roles)
	for i, r := range e.Roles {
		switch {
		case i == 0:
		case i == n-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(r)
		if i < len(e.Slots) {
			b.WriteString(" (slot ")
			b.WriteString(strconv.Itoa(int(e.Slots[i])))
			b.WriteString(")")
		}
	}
	b.WriteString(" hash to different Cluster slots; use a common hash tag like {name}")
	return b.String()
}

// Unwrap returns ErrCrossSlot.
func (e *CrossSlotError) Unwrap() error { return ErrCrossSlot }

// Is reports whether target is ErrCrossSlot or ErrInvalidConfig (a key layout is configuration).
func (e *CrossSlotError) Is(target error) bool {
	return target == ErrCrossSlot || target == ErrInvalidConfig
}

// CheckSameSlot returns nil when every key hashes to the same Cluster slot
// (trivially so for zero or one key), and otherwise a *CrossSlotError
// listing every key's role and slot. Call it before the first write of a
// multi-key script: on a Cluster the server would reject the script with
// CROSSSLOT, and a standalone server would accept keys that could never
// move to a Cluster together. It does not check for empty keys (see
// [ValidateKey] and [CheckKeys]).
func CheckSameSlot(keys ...NamedKey) error {
	if len(keys) < 2 {
		return nil
	}
	slots := make([]uint16, len(keys))
	same := true
	for i, k := range keys {
		slots[i] = Slot(k.Key)
		if slots[i] != slots[0] {
			same = false
		}
	}
	if same {
		return nil
	}
	roles := make([]string, len(keys))
	for i, k := range keys {
		roles[i] = k.Role
	}
	return &CrossSlotError{Roles: roles, Slots: slots}
}

type emptyKeyError struct{ role string }

func (e *emptyKeyError) Error() string { return "luakit: " + e.role + " is empty" }
func (e *emptyKeyError) Unwrap() error { return ErrEmptyKey }

// Is makes an empty key a configuration error too (errors.Is(err, ErrInvalidConfig)).
func (e *emptyKeyError) Is(target error) bool { return target == ErrInvalidConfig }

// ValidateKey returns nil when key is non-empty, and otherwise an error
// wrapping [ErrEmptyKey] whose message names role ("luakit: lease key is
// empty"). Any other bytes are valid in a Redis key.
func ValidateKey(role, key string) error {
	if key == "" {
		return &emptyKeyError{role: role}
	}
	return nil
}

// CheckKeys runs [ValidateKey] on each key in order, then [CheckSameSlot]
// on all of them, returning the first error: the usual precondition of a
// multi-key script.
func CheckKeys(keys ...NamedKey) error {
	for _, k := range keys {
		if err := ValidateKey(k.Role, k.Key); err != nil {
			return err
		}
	}
	return CheckSameSlot(keys...)
}

// crc16Table is the CRC16-CCITT (XMODEM) table for polynomial 0x1021.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crc16Table[byte(c>>8)^s[i]]
	}
	return c
}
