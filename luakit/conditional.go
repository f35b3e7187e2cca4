package luakit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// ConditionalCommands runs the owner-checked renewal and delete of a string key that holds an owner
// token as one plain command where the server has one, instead of a script: SET key token IFEQ token
// PX ms ([ConditionalSet]) and DELIFEQ key token ([DelIfEq]) or else DELEX key IFEQ token ([DelEx]).
// Each saves the server a script call and its inner GET (see the package documentation,
// "Conditional commands"). Both methods report ran false when the command was not sent, or was
// refused by the ACL with nothing written: the caller then runs its script.
//
// It probes once: the first call sends COMMAND DOCS SET DELIFEQ DELEX (one round trip, blocking
// within ctx) and keeps the answer; a probe the server refuses (an ACL without COMMAND) means none of
// them; a failed one (network, ctx) is retried by a later call; calls made while another probes use
// the scripts. A NOPERM reply to a command that names it makes later calls skip it.
//
// One value describes one client (one deployment, one ACL user): keep it with the factory built over
// the client. The zero value is ready; do not copy it after first use. Safe for concurrent use.
type ConditionalCommands struct {
	state   atomic.Uint32 // condProbed and the usable commands
	probing atomic.Bool   // a call is probing
}

const (
	condProbed  uint32 = 1 << iota // the server answered the probe
	condSet                        // SET ... IFEQ: known and not refused
	condDelIfEq                    // DELIFEQ: known and not refused
	condDelEx                      // DELEX ... IFEQ: known and not refused
)

// Extend renews key for token: SET key token IFEQ token PX ms, sent with [DoOrdered], when the server
// has [ConditionalSet]. ms is the new TTL in whole milliseconds as a decimal string, at least 1 (a
// script's ARGV form, so a caller that keeps it pays no conversion). held is true when key held token
// (it now expires ms milliseconds from now on the server's clock, whether it had an expiry or not) and
// false when key is absent or holds another string (nothing written). err is the command's error with
// ran true (a key of another type: the server's WRONGTYPE, as a script's GET gives; see [Classify]).
// Blocking, probing and ran: see [ConditionalCommands].
func (cc *ConditionalCommands) Extend(ctx context.Context, c rueidis.Client, key, token, ms string) (held, ran bool, err error) {
	if cc.load(ctx, c)&condSet == 0 {
		return false, false, nil
	}
	resp := DoOrdered(ctx, c, "SET", []string{key}, token, "IFEQ", token, "PX", ms)
	err = resp.Error()
	switch {
	case err == nil:
		return true, true, nil
	case rueidis.IsRedisNil(err):
		return false, true, nil
	case cc.refused(err, "set", condSet):
		return false, false, nil
	}
	return false, true, err
}

// Delete deletes key for token: DELIFEQ key token, or DELEX key IFEQ token on a server without
// DELIFEQ, sent with [DoOrdered]. deleted is true when key held token (now deleted) and false when
// key is absent or holds another string (nothing written). err is the command's error with ran true
// (a key of another type: WRONGTYPE, as a script's GET gives). Blocking, probing and ran: see
// [ConditionalCommands].
func (cc *ConditionalCommands) Delete(ctx context.Context, c rueidis.Client, key, token string) (deleted, ran bool, err error) {
	s := cc.load(ctx, c)
	var resp rueidis.RedisResult
	var name string
	var bit uint32
	switch {
	case s&condDelIfEq != 0:
		name, bit = "delifeq", condDelIfEq
		resp = DoOrdered(ctx, c, "DELIFEQ", []string{key}, token)
	case s&condDelEx != 0:
		name, bit = "delex", condDelEx
		resp = DoOrdered(ctx, c, "DELEX", []string{key}, "IFEQ", token)
	default:
		return false, false, nil
	}
	n, err := resp.AsInt64()
	switch {
	case err == nil && (n == 0 || n == 1):
		return n == 1, true, nil
	case err == nil:
		return false, true, errors.New("luakit: unexpected " + name + " reply " + strconv.FormatInt(n, 10))
	case cc.refused(err, name, bit):
		return false, false, nil
	}
	return false, true, err
}

// load returns the state, probing first when no probe has been answered and no other call probes.
func (cc *ConditionalCommands) load(ctx context.Context, c rueidis.Client) uint32 {
	if s := cc.state.Load(); s&condProbed != 0 {
		return s
	}
	if !cc.probing.CompareAndSwap(false, true) {
		return 0
	}
	defer cc.probing.Store(false)
	if s := cc.state.Load(); s&condProbed != 0 {
		return s
	}
	s, ok := probeConditional(ctx, c)
	if ok {
		cc.state.Store(s)
	}
	return s
}

// refused reports whether err is a NOPERM reply (nothing ran): the caller falls back to its script.
// When the server's reason names the command (the ACL refuses the command, not the key), bit is
// cleared so that later calls go to the script directly.
func (cc *ConditionalCommands) refused(err error, name string, bit uint32) bool {
	var pe *PermissionError
	if !errors.As(err, &pe) {
		return false
	}
	if strings.Contains(strings.ToLower(pe.Reason), "'"+name+"'") {
		for {
			s := cc.state.Load()
			if cc.state.CompareAndSwap(s, s&^bit) {
				break
			}
		}
	}
	return true
}

// probeConditional asks the server behind c which conditional commands it has, with one COMMAND DOCS
// (SET's IFEQ is an argument, not a command, so COMMAND INFO cannot tell). ok is false when the probe
// failed without an answer (network, ctx): nothing is learned. A server error reply (an ACL without
// COMMAND DOCS) is an answer: none.
func probeConditional(ctx context.Context, c rueidis.Client) (state uint32, ok bool) {
	docs, err := c.Do(ctx, c.B().CommandDocs().
		CommandName(ConditionalSet.Command, DelIfEq.Command, DelEx.Command).Build()).ToMessage()
	if err != nil {
		if _, reply := rueidis.IsRedisErr(err); reply {
			return condProbed, true
		}
		return 0, false
	}
	state = condProbed
	if doc, ok := docEntry(docs, ConditionalSet.Command); ok && hasToken(doc, ConditionalSet.Argument, 0) {
		state |= condSet
	}
	if _, ok := docEntry(docs, DelIfEq.Command); ok {
		state |= condDelIfEq
	}
	if doc, ok := docEntry(docs, DelEx.Command); ok && hasToken(doc, DelEx.Argument, 0) {
		state |= condDelEx
	}
	return state, true
}
