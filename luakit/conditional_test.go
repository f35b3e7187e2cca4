package luakit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docMap is a RESP3 map in docMsg: key, value, key, value...
type docMap []any

// docMsg builds a reply of nested arrays ([]any), maps (docMap) and bulk strings, as COMMAND DOCS
// answers (RESP3: maps; RESP2: the same as flat arrays of pairs).
func docMsg(t testing.TB, v any) rueidis.RedisMessage {
	t.Helper()
	var enc func(buf []byte, v any) []byte
	enc = func(buf []byte, v any) []byte {
		switch x := v.(type) {
		case string:
			return appendMsg(buf, '$', x, 0)
		case []any:
			buf = appendMsg(buf, '*', "", int64(len(x)))
			for _, e := range x {
				buf = enc(buf, e)
			}
			return buf
		case docMap:
			buf = appendMsg(buf, '*', "", int64(len(x)))
			buf[len(buf)-9] = '%'
			for _, e := range x {
				buf = enc(buf, e)
			}
			return buf
		}
		t.Fatalf("cannot encode %T", v)
		return nil
	}
	return decodeMsg(t, enc(make([]byte, 7), v))
}

// setDocs is SET's documentation as Valkey 9 answers it (trimmed): IFEQ is the token of an argument
// nested in the condition block, and the history mentions it in prose.
func setDocs(resp3 bool) any {
	m := func(kv ...any) any {
		if resp3 {
			return docMap(kv)
		}
		return kv
	}
	return m("summary", "Sets the string value of a key",
		"history", []any{[]any{"8.1.0", "Added the `IFEQ` option."}},
		"arguments", []any{
			m("name", "key", "type", "key"),
			m("name", "condition", "type", "oneof", "arguments", []any{
				m("name", "nx", "type", "pure-token", "token", "NX"),
				m("name", "comparison-value", "type", "string", "token", "IFEQ"),
			}),
		})
}

func TestCommandDocsTokens(t *testing.T) {
	t.Parallel()
	for _, resp3 := range []bool{true, false} {
		top := func(kv ...any) rueidis.RedisMessage {
			if resp3 {
				return docMsg(t, docMap(kv))
			}
			return docMsg(t, kv)
		}
		docs := top("set", setDocs(resp3), "delifeq", setDocs(resp3))
		doc, ok := docEntry(docs, "SET")
		require.True(t, ok, "resp3 %v", resp3)
		assert.True(t, hasToken(doc, "ifeq", 0), "resp3 %v: nested token", resp3)
		assert.True(t, hasToken(doc, "NX", 0))
		assert.False(t, hasToken(doc, "IFNE", 0), "resp3 %v", resp3)
		assert.False(t, hasToken(doc, "Added the `IFEQ` option.", 0), "prose is not a token")
		_, ok = docEntry(docs, "DELEX")
		assert.False(t, ok, "an unknown command has no entry")
		old := top("set", "x")
		doc, ok = docEntry(old, "set")
		require.True(t, ok)
		assert.False(t, hasToken(doc, "IFEQ", 0), "a server without IFEQ")
	}
	_, ok := docEntry(msg(t, '_', "", 0), "SET")
	assert.False(t, ok, "a nil reply")
}

// condClient answers COMMAND DOCS with docs (or docsErr), and every other command with reply (a
// message, or err when set), recording each command's words.
type condClient struct {
	rueidis.Client
	t       testing.TB
	docs    rueidis.RedisMessage
	docsErr error
	reply   func(words []string) (rueidis.RedisMessage, error)
	mu      sync.Mutex
	sent    []string
}

func (c *condClient) Mode() rueidis.ClientMode { return rueidis.ClientModeStandalone }
func (c *condClient) B() rueidis.Builder       { return rueidis.Builder{} }

func (c *condClient) Do(_ context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	words := cmd.Commands()
	c.mu.Lock()
	c.sent = append(c.sent, strings.Join(words, " "))
	c.mu.Unlock()
	if words[0] == "COMMAND" {
		if c.docsErr != nil {
			return rueidis.NewErrorResult(c.docsErr)
		}
		return rueidis.NewResult(c.docs, nil)
	}
	m, err := c.reply(words)
	return rueidis.NewResult(m, err)
}

func (c *condClient) commands() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.sent...)
}

// fastDocs is a COMMAND DOCS reply of a server with SET IFEQ and, as named, DELIFEQ or DELEX IFEQ.
func fastDocs(t testing.TB, del string) rueidis.RedisMessage {
	kv := []any{"set", setDocs(true)}
	switch del {
	case "DELIFEQ":
		kv = append(kv, "delifeq", docMap{"summary", "Delete key if value matches string."})
	case "DELEX":
		kv = append(kv, "delex", docMap{"arguments", []any{docMap{"name", "ifeq-value", "token", "IFEQ"}}})
	}
	return docMsg(t, docMap(kv))
}

func TestConditionalCommandsFastPath(t *testing.T) {
	t.Parallel()
	for _, del := range []string{"DELIFEQ", "DELEX"} {
		c := &condClient{t: t, docs: fastDocs(t, del), reply: func(w []string) (rueidis.RedisMessage, error) {
			switch {
			case w[0] == "SET" && w[1] == "mine":
				return msg(t, '+', "OK", 0), nil
			case w[0] == "SET" && w[1] == "gone":
				return msg(t, '_', "", 0), nil
			case w[0] == "SET":
				return rueidis.RedisMessage{}, redisErr(t, "WRONGTYPE Operation against a key holding the wrong kind of value")
			case w[1] == "mine":
				return msg(t, ':', "", 1), nil
			case w[1] == "gone":
				return msg(t, ':', "", 0), nil
			}
			return rueidis.RedisMessage{}, redisErr(t, "WRONGTYPE Operation against a key holding the wrong kind of value")
		}}
		var cc ConditionalCommands
		ctx := t.Context()
		for _, tc := range []struct {
			key       string
			held, err bool
		}{{"mine", true, false}, {"gone", false, false}, {"hash", false, true}} {
			held, ran, err := cc.Extend(ctx, c, tc.key, "tok", "1500")
			assert.True(t, ran, "%s extend", tc.key)
			assert.Equal(t, tc.held, held, "%s extend", tc.key)
			assert.Equal(t, tc.err, err != nil, "%s extend: %v", tc.key, err)
			deleted, ran, err := cc.Delete(ctx, c, tc.key, "tok")
			assert.True(t, ran, "%s delete", tc.key)
			assert.Equal(t, tc.held, deleted, "%s delete", tc.key)
			assert.Equal(t, tc.err, err != nil, "%s delete: %v", tc.key, err)
		}
		sent := c.commands()
		delCmd := "DELIFEQ mine tok"
		if del == "DELEX" {
			delCmd = "DELEX mine IFEQ tok"
		}
		require.Len(t, sent, 7, "%s: one probe, then one command per call: %q", del, sent)
		assert.Equal(t, "COMMAND DOCS SET DELIFEQ DELEX", sent[0])
		assert.Equal(t, "SET mine tok IFEQ tok PX 1500", sent[1])
		assert.Equal(t, delCmd, sent[2])
	}
}

func TestConditionalCommandsProbe(t *testing.T) {
	t.Parallel()
	never := func(w []string) (rueidis.RedisMessage, error) {
		t.Errorf("sent %q to a server without the conditional commands", w)
		return rueidis.RedisMessage{}, errors.New("unexpected")
	}
	tests := []struct {
		name    string
		docs    rueidis.RedisMessage
		docsErr error
		probes  int // COMMAND DOCS sent over three Extend + Delete pairs
	}{
		{"server without them", docMsg(t, docMap{"set", docMap{"summary", "x"}}), nil, 1},
		{"probe refused by the ACL", rueidis.RedisMessage{}, redisErr(t, "NOPERM User u has no permissions to run the 'command|docs' command"), 1},
		{"probe unanswered: retried", rueidis.RedisMessage{}, context.DeadlineExceeded, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &condClient{t: t, docs: tt.docs, docsErr: tt.docsErr, reply: never}
			var cc ConditionalCommands
			for range 3 {
				_, ran, err := cc.Extend(t.Context(), c, "k", "tok", "100")
				assert.False(t, ran)
				assert.NoError(t, err)
				_, ran, err = cc.Delete(t.Context(), c, "k", "tok")
				assert.False(t, ran)
				assert.NoError(t, err)
			}
			assert.Len(t, c.commands(), tt.probes, "%q", c.commands())
		})
	}
}

func TestConditionalCommandsRefusedByACL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		reason   string
		remember bool // later calls skip the command
	}{
		{"command refused", "NOPERM User u has no permissions to run the 'delifeq' command", true},
		{"key refused", "NOPERM No permissions to access a key", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &condClient{t: t, docs: fastDocs(t, "DELIFEQ"), reply: func(w []string) (rueidis.RedisMessage, error) {
				if w[0] == "SET" {
					return msg(t, '+', "OK", 0), nil
				}
				return rueidis.RedisMessage{}, redisErr(t, tt.reason)
			}}
			var cc ConditionalCommands
			for range 2 {
				deleted, ran, err := cc.Delete(t.Context(), c, "k", "tok")
				assert.False(t, ran, "a refused command falls back to the script")
				assert.False(t, deleted)
				assert.NoError(t, err)
			}
			held, ran, err := cc.Extend(t.Context(), c, "k", "tok", "100")
			assert.True(t, held && ran, "SET IFEQ is still used")
			assert.NoError(t, err)
			want := []string{"COMMAND DOCS SET DELIFEQ DELEX", "DELIFEQ k tok", "DELIFEQ k tok", "SET k tok IFEQ tok PX 100"}
			if tt.remember {
				want = []string{"COMMAND DOCS SET DELIFEQ DELEX", "DELIFEQ k tok", "SET k tok IFEQ tok PX 100"}
			}
			assert.Equal(t, want, c.commands())
		})
	}
}
