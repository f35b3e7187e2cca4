// Package idemhttp is net/http middleware that makes unsafe requests idempotent with the
// Idempotency-Key request header of the IETF HTTPAPI draft "The Idempotency-Key HTTP Header Field",
// storing claims and responses in an [idempotency.Store].
//
//	st, _ := idempotency.New(client)
//	mw, _ := idemhttp.New(st,
//		idemhttp.WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
//		idemhttp.WithScope(func(r *http.Request) (string, error) { return tenantOf(r) }))
//	http.Handle("/payments", rateLimit.Handler(mw.Handler(payments))) // rate limit outside
//
// # Behaviour
//
//	request                                        response
//	no key, required for the route                 400 problem+json, handler not run
//	no key, optional                               handler runs unprotected
//	key repeated or malformed                      400
//	body larger than WithMaxRequestBody            413 (key not claimed)
//	WithFingerprint's function returns an error    400 (key not claimed, handler not run)
//	first request with the key                     handler runs, its claim kept alive; the response
//	                                               (status, allow-listed headers, body) is stored for
//	                                               WithRetention if the store policy accepts it,
//	                                               otherwise the claim is abandoned
//	duplicate, original completed                  stored response + Idempotent-Replayed: true
//	duplicate, original in flight                  409 + Retry-After: 1 (after WithWait, if set)
//	same key, different method/path/query/body     422 (the key is scoped by method and path, so
//	                                               in practice: a different query or body)
//	WithScope's function returns an error          500 (key not claimed, handler not run)
//	claim key holds data the store did not write,  500 (a retry cannot fix it; WithFailOpen does
//	or a stored response that does not decode      not apply)
//	store error or uncertain outcome               503 + Retry-After: 1 (WithFailOpen: handler runs)
//
// The claim key is [ClaimKey] (a SHA-256 digest of the caller's scope from [WithScope], the method,
// the escaped path and the key); the fingerprint is [DefaultFingerprint] (a SHA-256 digest of method,
// path, raw query and body) unless [WithFingerprint] computes it, for example from canonical JSON. The
// body is read completely (up to the limit) before the handler runs and handed to it from memory.
//
// # Leases and retention
//
// A claim has a short lease ([WithClaimLease], default 30s), renewed every lease/3 while the handler
// runs ([idempotency.Claim.KeepAlive]), also after the client has gone, so handlers may run longer
// than the lease; the handler's request context ends, with context.Cause [idempotency.ErrLost] or
// [idempotency.ErrExpired], if the claim cannot be kept (a duplicate may then run). If the instance
// crashes, the claim frees the key after at most one lease, and the client's retry runs the handler.
// A stored response is replayed for the retention ([WithRetention], default 24h, the IETF draft's
// typical window), independent of the lease. 30s keeps a crashed request blocked for well under a
// minute while renewing only every 10s and riding out seconds-long server or network hiccups.
//
// # What is stored
//
// [WithStorePolicy] decides per final response; [DefaultStorePolicy] stores all except 429 and 503
// (responses that tell the client to retry later: storing them would replay "retry later" for a day).
// 5xx responses are stored: a request whose outcome the server decided, perhaps after a partial side
// effect, must not run again. A handler can refuse storage of its own response with [DoNotStore].
// A response not stored is served and its claim abandoned as soon as the handler returns, so a retry
// finds the key free. Retry-After is on [DefaultReplayHeaders], so a replay carries it.
//
// # With rate limiting
//
// Put ratelimithttp outside idemhttp, and authentication outside both:
//
//	handler := auth(rl.Handler(idem.Handler(app)))
//
// A limited request is then answered 429 before idemhttp runs: no claim is written and nothing is
// stored whatever the store policy, so the store costs nothing for rejected traffic, and the retry
// after Retry-After runs the handler. Replays pass through the limiter too, so a client cannot exceed
// its limit by replaying. The other order works with the default store policy (the inner 429 is not
// stored and its claim is abandoned) but writes and deletes a claim for every limited request, and
// would store the 429 under a policy that accepts it.
//
// # Decisions
//
//   - Informational (1xx) responses are passed through and not stored.
//   - A response whose body exceeds [WithMaxStoredResponse] is served to the original caller but not
//     stored, and its claim is left pending until its lease ends (duplicates get 409 meanwhile). It is
//     not abandoned, because abandoning would let a duplicate run the side effect again at once.
//   - A panicking handler: the middleware cannot know whether a side effect happened, so by default the
//     claim stays pending until its lease ends. With [WithAbandonOnPanic](true), which declares the
//     handlers side-effect-free when they panic before writing, a claim whose handler wrote nothing is
//     abandoned so a retry runs again. The panic is re-raised afterwards in both cases.
//   - If the claim was lost before the response could be stored, the response is served and a warning
//     is logged; it is not stored, and a newer claim is untouched.
//   - Store failures fail closed (503) unless [WithFailOpen] is set.
//
// Stored responses use a compact binary encoding (status, header values, body); duplicates receive
// them with the headers on the allow-list ([WithReplayHeaders]) only.
//
// The guarantees and limits of [idempotency.Store] apply: duplicates are suppressed only while Redis
// retains the claim or response.
package idemhttp
