package luakit

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCRC16CheckValue(t *testing.T) {
	t.Parallel()
	assert.Equal(t, uint16(0x31C3), crc16("123456789"))
}

func TestSlot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		tag  string
		slot uint16
	}{
		{"foo", "foo", 12182},
		{"bar", "bar", 5061},
		{"", "", 0},
		{"123456789", "123456789", 0x31C3 % 16384},
		{"{user1000}.following", "user1000", 3443},
		{"{user1000}.followers", "user1000", 3443},
		{"foo{}{bar}", "foo{}{bar}", 8363},
		{"foo{{bar}}zap", "{bar", 4015},
		{"foo{bar}{zap}", "bar", 5061},
		{"{}", "{}", Slot("{}")},
		{"{", "{", Slot("{")},
		{"}{a}", "a", Slot("a")},
		{"a{b", "a{b", Slot("a{b")},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			assert.Equal(t, tt.tag, HashTag(tt.key))
			assert.Equal(t, tt.slot, Slot(tt.key))
		})
	}
	assert.Equal(t, Slot("{user1000}.following"), Slot("{user1000}.followers"))
}

func TestKeyspace(t *testing.T) {
	t.Parallel()
	var zero Keyspace
	assert.Equal(t, "", zero.Prefix())
	assert.Equal(t, "k", zero.Key("k"))
	assert.Equal(t, NewKeyspace(""), zero)

	for _, p := range []string{"app:", "a\x00b:", "\xff\xfe:", "{tenant}:"} {
		ks := NewKeyspace(p)
		assert.Equal(t, p, ks.Prefix())
		for _, n := range []string{"", "x", "\x00", "\xc3\x28", "{n}"} {
			k := ks.Key(n)
			assert.Equal(t, len(p)+len(n), len(k))
			assert.True(t, strings.HasPrefix(k, p))
			assert.True(t, strings.HasSuffix(k, n))
		}
	}
	ks := NewKeyspace("{tenant}:")
	assert.Equal(t, Slot(ks.Key("lease")), Slot(ks.Key("fence")))
	assert.Equal(t, Slot("tenant"), Slot(ks.Key("{other}")))
}

func TestCheckSameSlot(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckSameSlot())
	require.NoError(t, CheckSameSlot(NamedKey{"lease key", "foo"}))
	require.NoError(t, CheckSameSlot(NamedKey{"lease key", "{x}a"}, NamedKey{"fence key", "{x}b"}))

	err := CheckSameSlot(NamedKey{"lease key", "foo"}, NamedKey{"fence key", "bar"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrCrossSlot))
	var cse *CrossSlotError
	require.True(t, errors.As(err, &cse))
	assert.Equal(t, []string{"lease key", "fence key"}, cse.Roles)
	assert.Equal(t, []uint16{12182, 5061}, cse.Slots)
	assert.Equal(t, "luakit: lease key (slot 12182) and fence key (slot 5061) hash to different Cluster slots; use a common hash tag like {name}", err.Error())
	assert.NotContains(t, err.Error(), "foo")

	err = CheckSameSlot(NamedKey{"a key", "foo"}, NamedKey{"b key", "foo"}, NamedKey{"c key", "bar"})
	assert.Equal(t, "luakit: a key (slot 12182), b key (slot 12182) and c key (slot 5061) hash to different Cluster slots; use a common hash tag like {name}", err.Error())

	// The documented example message.
	e := &CrossSlotError{Roles: []string{"lease key", "fence key"}, Slots: []uint16{1, 2}}
	assert.Equal(t, "luakit: lease key (slot 1) and fence key (slot 2) hash to different Cluster slots; use a common hash tag like {name}", e.Error())
}

func TestValidateKey(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateKey("lease key", "x"))
	require.NoError(t, ValidateKey("lease key", "\x00"))
	err := ValidateKey("lease key", "")
	require.ErrorIs(t, err, ErrEmptyKey)
	assert.Equal(t, "luakit: lease key is empty", err.Error())

	require.ErrorIs(t, CheckKeys(NamedKey{"a", "x"}, NamedKey{"fence key", ""}), ErrEmptyKey)
	require.ErrorIs(t, CheckKeys(NamedKey{"a", "foo"}, NamedKey{"b", "bar"}), ErrCrossSlot)
	require.NoError(t, CheckKeys(NamedKey{"a", "{t}1"}, NamedKey{"b", "{t}2"}))
}

func FuzzSlot(f *testing.F) {
	for _, s := range []string{"", "foo", "{a}b", "foo{}{bar}", "foo{{bar}}zap", "{", "}", "{}", "a{b}c{d}", "\xff{\x00}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		s := Slot(k)
		if s >= SlotCount {
			t.Fatalf("Slot(%q) = %d", k, s)
		}
		tag := HashTag(k)
		if s != Slot(tag) {
			t.Fatalf("Slot(%q)=%d != Slot(HashTag)=%d", k, s, Slot(tag))
		}
		if crc16(tag)%SlotCount != s {
			t.Fatalf("slot is not crc16(tag) mod 16384")
		}
		if tag != k {
			// A tag is a non-empty substring strictly inside braces.
			i := strings.Index(k, "{"+tag+"}")
			if tag == "" || i < 0 || i != strings.IndexByte(k, '{') || strings.IndexByte(tag, '}') >= 0 {
				t.Fatalf("bad tag %q for %q", tag, k)
			}
			// Anything appended keeps the slot.
			if Slot(k+"suffix}{x}") != s {
				t.Fatalf("suffix moved the slot of %q", k)
			}
		}
	})
}

func FuzzKeyspace(f *testing.F) {
	f.Add("app:", "lease")
	f.Add("{t}:", "{x}")
	f.Add("\x00\xff", "")
	f.Add("", "{a}")
	f.Fuzz(func(t *testing.T, prefix, name string) {
		ks := NewKeyspace(prefix)
		k := ks.Key(name)
		if ks.Prefix() != prefix || k != prefix+name || !strings.HasPrefix(k, prefix) || !strings.HasSuffix(k, name) {
			t.Fatalf("Key(%q) with prefix %q = %q", name, prefix, k)
		}
		if HashTag(prefix) != prefix { // the prefix holds a complete tag
			if HashTag(k) != HashTag(prefix) || Slot(k) != Slot(prefix) {
				t.Fatalf("tagged prefix %q did not pin the slot of %q", prefix, k)
			}
		}
	})
}
