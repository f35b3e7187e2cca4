// Package idemhttp is net/http middleware that makes unsafe requests idempotent with the
// Idempotency-Key request header of the IETF HTTPAPI draft "The Idempotency-Key HTTP Header Field",
// storing claims and responses in an [idempotency.Store].
//
//	st, _ := idempotency.New(client)
//	mw, _ := idemhttp.New(st,
//		idemhttp.WithRequired(func(r *http.Request) bool { return r.Method == http.MethodPost }),
//		idemhttp.WithScope(func(r *http.Request) (string, error) { return tenantOf(r) }))
//	http.Handle("/payments", mw.Handler(payments))
//
// # Behaviour
//
//	request                                        response
//	no key, required for the route                 400 problem+json, handler not run
//	no key, optional                               handler runs unprotected
//	key repeated or malformed                      400
//	body larger than WithMaxRequestBody            413 (key not claimed)
//	first request with the key                     handler runs; status, allow-listed headers and
//	                                               body are stored for WithTTL
//	duplicate, original completed                  stored response + Idempotent-Replayed: true
//	duplicate, original in flight                  409 + Retry-After: 1 (after WithWait, if set)
//	same key, different method/path/query/body     422 (the key is scoped by method and path, so
//	                                               in practice: a different query or body)
//	WithScope's function returns an error          500 (key not claimed, handler not run)
//	claim key holds data the store did not write,  500 (a retry cannot fix it; WithFailOpen does
//	or a stored response that does not decode      not apply)
//	store error or uncertain outcome               503 + Retry-After: 1 (WithFailOpen: handler runs)
//
// The claim key is a SHA-256 digest of the caller's scope ([WithScope]), the method, the escaped path
// and the key; the fingerprint is a SHA-256 digest of method, path, raw query and body. The body is
// read completely (up to the limit) before the handler runs and handed to it from memory.
//
// # Decisions
//
//   - Every final response of the handler is stored, 5xx included: a retry of a request whose
//     outcome the server already decided gets the same answer. Informational (1xx) responses are
//     passed through and not stored.
//   - A response whose body exceeds [WithMaxStoredResponse] is served to the original caller but not
//     stored, and its claim is left pending until the TTL ends (duplicates get 409 meanwhile). It is
//     not abandoned, because abandoning would let a duplicate run the side effect again at once.
//   - A panicking handler: the middleware cannot know whether a side effect happened, so by default the
//     claim stays pending until the TTL ends. With [WithAbandonOnPanic](true), which declares the
//     handlers side-effect-free when they panic before writing, a claim whose handler wrote nothing is
//     abandoned so a retry runs again. The panic is re-raised afterwards in both cases.
//   - If the claim expired before the response could be stored (a handler that outlived the TTL), the
//     response is served and a warning is logged; it is not stored, and a newer claim is untouched.
//   - Store failures fail closed (503) unless [WithFailOpen] is set.
//
// Stored responses use a compact binary encoding (status, header values, body); duplicates receive
// them with the headers on the allow-list ([WithReplayHeaders]) only.
//
// The guarantees and limits of [idempotency.Store] apply: duplicates are suppressed only while Redis
// retains the claim or response.
package idemhttp
