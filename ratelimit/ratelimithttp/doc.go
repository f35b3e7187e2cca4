// Package ratelimithttp is net/http middleware that rate-limits requests with a [ratelimit.Keyed]
// limiter and advertises the limit with the IETF HTTPAPI draft "RateLimit header fields for HTTP"
// (draft-ietf-httpapi-ratelimit-headers): the RateLimit-Policy and RateLimit fields, plus
// Retry-After on rejections.
//
//	limiter, _ := ratelimit.NewKeyed(client,
//		ratelimit.GCRA{Burst: 20, EmissionInterval: 100 * time.Millisecond},
//		ratelimit.WithKeyPrefix("rl:api:"))
//	mw, _ := ratelimithttp.New(limiter, ratelimithttp.WithPolicyNames("api"))
//	http.Handle("/api/", mw.Handler(api))
//
// # Header fields
//
// Every decided response (allowed or rejected for capacity) carries
//
//	RateLimit-Policy: "api";q=20;w=2
//	RateLimit: "api";r=0;t=2
//
// q is the policy's capacity ([ratelimit.Result.Limit]); w its window in whole seconds, rounded up
// and at least 1: the window of a fixed or sliding window, the full refill time of a token bucket
// (ceil(Limit/TokensPerPeriod) × Period) and Burst × EmissionInterval for GCRA. r is the remaining
// permits of the decision's reply, t the seconds until the quota is full again
// ([ratelimit.Result.Reset]), rounded up; on a 429 with Retry-After, t is at most the Retry-After
// (the draft's rule that Retry-After does not end before the effective window: a token bucket or GCRA
// lets the request pass before it is full again). Names are Structured Field Strings. For a
// [ratelimit.Composite], RateLimit-Policy lists every component in order (each under its name,
// [WithPolicyNames]), so a client sees quotas that do not bind yet, and RateLimit describes the
// binding one ([ratelimit.Result.Component]): for an admitted request the component with the
// lowest remaining permits, for a rejected one the component that makes it wait longest (the one
// Retry-After counts down):
//
//	RateLimit-Policy: "burst";q=10;w=5, "minute";q=100;w=60
//	RateLimit: "burst";r=3;t=4
//
// [WithLegacyHeaders] adds X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds,
// a delta) for the binding quota, for clients that predate the IETF fields.
//
// A rejection for capacity is 429 Too Many Requests with Retry-After: the seconds until the whole
// request (its full cost) could pass, rounded up so a client that waits that long is not refused
// early by the rounding. Other callers can still take the capacity first.
//
// # Decisions
//
// A [Middleware] makes one decision per request and answers:
//
//	decision                          response
//	allowed                           handler runs; RateLimit-Policy and RateLimit fields set;
//	                                  the decision is in the request's context ([ResultFrom])
//	rejected, capacity                429 + Retry-After + RateLimit-Policy + RateLimit
//	rejected, cost above capacity     429 + RateLimit-Policy (no Retry-After: no retry can pass; no
//	                                  RateLimit: no server state was read)
//	rejected, deny list               429, no Retry-After and no rate-limit fields
//	key or cost function fails, or    500, handler not run (logged)
//	the deny-list identity is empty
//	limiter fails or times out        503, no rate-limit fields (fail closed, the default), or the
//	                                  handler runs unprotected, without them ([WithFailOpen]); logged
//	                                  (bound the wait with [WithTimeout])
//	client went away (ctx cancelled)  nothing is written
//
// In detail:
//
//   - Keys: the default key is the client IP of r.RemoteAddr ([RemoteIP]). X-Forwarded-For and
//     similar headers are not trusted by default, since any client can set them; behind your own
//     proxies use [WithKey] with [TrustedProxyIP] (trusted CIDRs and the one field they append to,
//     X-Forwarded-For or Forwarded, read from the right; the other field is never read; IPv6 clients
//     keyed by a /64 by default; see "Client IP behind proxies" below).
//   - A request whose cost exceeds the policy's capacity can never pass: 429 without Retry-After and
//     without the RateLimit field (the limiter decides it without reading the capacity key), but with
//     RateLimit-Policy, so the client can see why.
//   - Deny-list rejections ([ratelimit.ReasonDenyList], with [ratelimit.WithKeyedDenyList]) are 429
//     without Retry-After and without rate-limit fields: the deny list is an admission filter with
//     bounded cache staleness, not an authorization check, and the quota says nothing about when it
//     lifts. Answer 403 instead with [WithRejected] if your deny list means "forbidden".
//   - A negative cost, a key function error, an empty key or an empty deny-list identity is a
//     programming error: 500, the handler does not run.
//   - Limiter failures (server down, timeouts, uncertain outcomes, a closed limiter, foreign data at
//     the key) fail closed by default: 503 without rate-limit fields. [WithFailOpen] runs the
//     handler unprotected instead. Both are logged ([WithLogger]) so the choice is never silent. An
//     uncertain outcome may still have consumed the permits on the server. [WithTimeout] bounds how
//     long an unresponsive server can hold a request before that choice applies.
//
// The guarantees of [ratelimit.Keyed] apply: every decision is one script on the server, using the
// server's clock, atomic across every process sharing the key.
//
// # Client IP behind proxies
//
// [TrustedProxyIP] reads one forwarding field, the one your proxies append to; the other (and
// X-Real-IP) is never read: a proxy passes a field it does not write through untouched, so a client
// could put any address in it. When the TCP peer (r.RemoteAddr) is not in the trusted networks, the
// peer is the client and no header is read. Otherwise the chain in the field is walked from the right
// (the element the nearest proxy appended; several field lines are one list, in order; empty
// elements are skipped): the first address not in trusted is the client; when every element is
// trusted, the leftmost one; when the field is absent or empty, the peer. Elements are parsed one at
// a time during the walk, so the elements left of the client, which the client wrote, are never
// parsed: neither an address nor garbage there can change the key or cause an error. An element the
// walk does reach that is not an IP address (for Forwarded, also an element without a "for"
// parameter, an obfuscated "_x" or "unknown" node, or a malformed element) is an error: a proxy you
// trust wrote it, so the chain is misconfigured; the key function fails and the middleware answers
// 500 and logs it. The element grammar of each field is on [XForwardedFor] and [Forwarded].
package ratelimithttp
