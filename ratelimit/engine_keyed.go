package ratelimit

import "strconv"

// keyedFor returns a copy of c whose decisions use the keyed form of the scripts: the stored state
// records its settings' signature and version, state stored under other settings is migrated to c's
// (or, when stored with a higher version, decided by the stored settings) inside the decision, and
// unsigned state is taken to hold fallback's settings (c's own when fallback is nil, equal to c or of
// another algorithm). The copy shares c's immutable fields.
func (c *compiled) keyedFor(version int64, fallback *compiled) *compiled {
	k := *c
	k.keyed = true
	head := make([]string, 0, 5+len(c.block)+len(fallbackBlock(c, fallback)))
	ver := strconv.FormatInt(version, 10)
	if c.algo == algoGCRA {
		// "|version|signature", burst, T, and the fallback T only when there is one: the fewer
		// arguments, the less work per call for the server.
		head = append(head, "|"+ver+"|"+c.sig)
		head = append(head, c.block...)
		if fallback != nil && fallback.algo == algoGCRA && !fallback.equal(c) {
			head = append(head, strconv.FormatInt(fallback.emission, 10))
		}
	} else {
		fbb := fallbackBlock(c, fallback)
		has := "0"
		if fbb != nil {
			has = "1"
		}
		head = append(head, ver, c.sig, has)
		head = append(head, c.block...)
		head = append(head, fbb...)
	}
	k.keyedArgs = head
	k.argsProbe = k.decideArgs("0")
	k.argsOne = k.decideArgs("1")
	return &k
}

// fallbackBlock is the settings block unsigned state is taken to hold, or nil for c's own.
func fallbackBlock(c, fallback *compiled) []string {
	if fallback == nil || c.algo == algoGCRA || fallback.algo != c.algo || fallback.equal(c) {
		return nil
	}
	return fallback.block
}
