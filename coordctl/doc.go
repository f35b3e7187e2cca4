// Package coordctl is the library behind the coordctl command: an operator's view of Coordkit's
// coordination state on Redis and Valkey, built only on the inspection and admin functions the
// primitive modules export (lock.Locker.Inspect, semaphore.Semaphore.Inspect, idempotency.Store.Inspect, ...).
// It never decodes a module's keys itself and never sends a raw write command.
//
//	coordctl [--url redis://host:6379/0] [--cluster] [--prefix P] [--json] <primitive> inspect <key>
//	coordctl watch [--interval 1s] <primitive> <key>
//	coordctl lock force-release <name> --yes
//	coordctl ratelimit inspect <key> --policy fixed:100/1m
//	coordctl denylist deny <deny-list-key> <identity> --yes
//
// Inspections are read-only: each is one read-only script (or read command) of the module; nothing is
// written and no expiry changes. Admin actions (lock and lease force-release, latch delete,
// idempotency abandon, ratelimit reset, deny-list deny and allow) change state only with --yes, and
// print what they changed. Owner tokens and passwords are never printed: the modules do not return
// tokens, and the URL is shown as its addresses only.
//
// Exit codes: 0 success (an absent key is a result, not an error); 1 the operation failed (server
// unreachable, data at the key not written by the module, server error); 2 bad usage (unknown
// primitive or flag, missing argument, an admin action without --yes). Nothing is written on any
// failure before the admin action itself.
//
// Connection: --url (or COORDCTL_URL) takes redis:// or rediss:// URLs as rueidis.ParseURL does
// (user and password in the URL, "?addr=host:port" for more cluster nodes); COORDCTL_USERNAME and
// COORDCTL_PASSWORD supply credentials the URL lacks. --cluster requires the server to be a
// Cluster (the client detects one in any case). Client-side caching is off.
package coordctl
