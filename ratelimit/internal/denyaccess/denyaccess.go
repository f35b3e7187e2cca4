// Package denyaccess lets package ratelimit check a deny list without the list's own hooks: a
// limiter's deny-list check is part of the limiter's admitted call, so it must not open a scope of
// the list. Package denylist sets IsDenied when it is initialised (ratelimit imports denylist, so it
// is set before any ratelimit code runs).
package denyaccess

import "context"

// IsDenied reports whether identity is on list (a *denylist.List), from its cache or the server,
// without running the list's hooks.
var IsDenied func(ctx context.Context, list any, identity string) (bool, error)
