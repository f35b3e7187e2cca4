// Package ownership is the one implementation of Coordkit's owner-token handles: the [Handle] that
// lock.Lease, lease.Lease, rwlock.Lease, semaphore.Permit and redlock.Lease hold privately (and leader
// uses through lock), the [Waiter] behind every blocking acquisition, and the written contract below.
// Each primitive keeps only its keys, scripts, decoding and genuine extras (a fencing token, a hash
// field, a read/write mode, a quorum); its handle writes the contract's methods on its own type (one
// line each, pointing here), and its documentation states only what differs. Users of the primitives
// never reach a Handle: this package is for the primitives' own code.
//
// # Model
//
// An acquisition sends one script with a fresh random owner token (128 bits) and a TTL. The handle's
// local estimate of the hold's life is measured from just before that send: deadline = send time + TTL
// − 1ms, or − the primitive's larger margin (redlock's clock-drift allowance). The server's expiry starts when the
// script runs, which is later, so on a correct clock the estimate never outlives the server's hold. The
// estimate is also shortened by [ServerClockStep] (1ms, at most half the TTL): servers count expiry in
// whole milliseconds of a truncated clock, and Redis 8 expires a key within the very millisecond of its
// expiry time, so a hold can end up to just under 1ms before run time + TTL.
// Every renewal restarts the estimate from its own send time.
//
// # Contract
//
// One answer for every handle, whatever the primitive:
//
//	situation                                      answer
//	acquisition granted after the estimate elapsed  not acquired: ErrLateReply; an owner-checked release is sent
//	acquisition outcome unknown (no reply)          ErrUncertain; an owner-checked release is sent, ordered behind it
//	no connection could be made (refused dial)      not uncertain: nothing was sent; a transient error
//	                                                (luakit.NotSent), retried by a waiting acquisition within ctx
//	cleanup after an uncertain or late acquisition  one release on the same connection (ExecOrdered), no socket
//	                                                deadline, bounded by the cleanup timeout, surviving ctx
//	Extend confirmed in time                        (true, nil); estimate = send time + TTL
//	Extend finds no hold of this owner              (false, nil); the handle ends with ErrLost
//	Extend reply after the estimate elapsed         (false, nil); the handle ends with ErrExpired and surrenders
//	                                                the hold (owner-checked release)
//	handle ended while Extend waited or was in      (false, nil); Extend and Release run one at a time, so a
//	flight                                          release waits for an in-flight renewal
//	Extend outcome unknown (no reply)               (false, ErrUncertain); the handle keeps its previous estimate,
//	                                                a safe lower bound (lowered for a shorter TTL)
//	Extend fails with a server error reply          (false, err); the handle is unchanged
//	Extend, Verify on an ended handle               (false, nil), no I/O
//	Verify finds the hold                           (true, nil); says nothing about any later moment
//	Verify finds no hold of this owner              (false, nil); the handle ends with ErrLost
//	Verify fails or is uncertain                    (false, err); the handle is unchanged
//	Release with a ctx that already ended           error wrapping ctx.Err(); nothing sent; the handle still
//	                                                vouches (say so: it is usable)
//	Release sent                                    the handle ends with ErrReleased whatever the outcome;
//	                                                Released, NotOwned, or AlreadyReleased after an earlier
//	                                                uncertain attempt
//	Release uncertain                               ErrUncertain; call Release again to settle (the hold
//	                                                otherwise expires after its TTL)
//	Release after an answered release               AlreadyReleased, no I/O
//	concurrent Release                              serialised: one reports the removal, the others
//	                                                AlreadyReleased
//	Close                                           Release bounded by the cleanup timeout whatever ctx: nil
//	                                                once the server answered or an earlier release settled
//	                                                it (no I/O); a failure is returned and logged (the
//	                                                semaphore retries it in the background instead)
//	KeepAlive                                       each renewal due RenewFraction × TTL after the last
//	                                                confirmed one, and at the latest half a period before the
//	                                                estimate ends; re-armed by every confirmed ExtendTTL (from
//	                                                any goroutine); started with less left, it renews at once;
//	                                                failed or uncertain renewals retried while the estimate
//	                                                lasts; ends on loss or expiry; ctx ending stops it without
//	                                                releasing; Release stops it and waits until no renewal of
//	                                                the handle is in flight (none is sent after it returns).
//	                                                Renewals run on a scheduler shared by every handle of one
//	                                                Config (see # Keep-alive scheduler), not a goroutine per
//	                                                handle
//	KeepAlive renewal refused (terminal error:      the handle ends at once with that error as its cause
//	NOPERM, WRONGTYPE)                              (errors.Is(err, luakit.ErrNoPermission) for an ACL
//	                                                refusal); no retry can succeed
//	Done, Context                                   one channel and one context for the handle's whole life;
//	                                                never reopened; the cause is ErrExpired, ErrLost,
//	                                                ErrReleased or a refused renewal's terminal error (the
//	                                                first one wins)
//	Err, Remaining, Done, Context at one instant    agree: each reads the clock and ends the handle once the
//	                                                estimate elapsed, even before its timer fires
//	Remaining, Deadline                             local estimate; Remaining 0 once ended, Forever without
//	                                                expiry
//	waiting acquisition                             sleeps on key invalidations and the holders' TTL, never on a
//	                                                fixed period; a client without working tracking logs one
//	                                                warning per primitive instance and wakes at the holders' TTL
//	                                                (redlock excepted: over independent nodes it retries after a
//	                                                jittered delay, so that contenders woken together do not
//	                                                split the nodes' votes)
//	ctx ends while waiting                          error wrapping ctx.Err() (and ErrUncertain if an attempt was
//	                                                in flight; its cleanup is sent)
//
// The errors are luakit's shared values ([luakit.ErrNotAcquired], [luakit.ErrLateReply],
// [luakit.ErrUncertain], [luakit.ErrLost], [luakit.ErrExpired], [luakit.ErrReleased],
// [luakit.ErrKeepAliveRunning]); every primitive re-exports them, so errors.Is(err, lock.ErrLost) and
// errors.Is(err, luakit.ErrLost) agree.
//
// # Acquisition attempts
//
// [Config.Try] reads one attempt's outcome by one rule for every primitive (the contract's
// acquisition rows, in the order they are checked):
//
//   - ctx already ended: nothing is sent; Err wraps ctx.Err() (not uncertain).
//   - no reply read (luakit.IsUncertain): the owner-checked cleanup is sent behind the attempt
//     ([Cleanup]); Err wraps [luakit.ErrUncertain]; Retry when the cleanup was answered (this owner
//     then holds nothing) and ctx is live.
//   - an error of unknown kind (luakit.MayHaveApplied): the cleanup is sent; Err, no retry.
//   - an error reply (the script stopped before writing) or a refused dial ([luakit.NotSent]): no
//     cleanup; Retry for a transient one.
//   - a malformed reply (DecodeAcquire's error): the script may have written a hold that cannot be
//     read back, so the cleanup is sent and Err wraps [luakit.ErrUncertain] and the decoder's error;
//     no retry (a reply the primitive cannot read will not change).
//   - a refusal the script answered (Reply.Err): that error, no cleanup, no retry.
//   - busy: Busy with the holders' TTL and Err [luakit.ErrNotAcquired].
//   - granted: GrantAcquire; a late reply is Retry with Err wrapping [luakit.ErrLateReply].
//
// # Ordering
//
// Every command of a handle (acquisition, renewal, verification, release, cleanup) is sent without a
// socket deadline and, through [Send] or a backend using [luakit.Script.ExecOrdered], on one connection
// of a standalone client, so a command queued after one whose reply timed out runs after it on the
// server. The limits of that ordering (Cluster clients with a raised PipelineMultiplex,
// DisableAutoPipelining, a connection broken between the two) are ExecOrdered's.
//
// # Non-guarantees
//
// The estimate is local timing: a paused process, a clock that jumps, or a server that loses data
// (restart without persistence, failover to a lagging replica) can end a hold the estimate still
// vouches for. Check fencing tokens at the protected resource where the primitive issues them.
//
// # Keep-alive scheduler
//
// [Handle.KeepAlive] starts no goroutine per handle. Every handle granted with one [*Config] (one
// primitive factory: a Locker, a Leases, a Semaphore, a redlock Group..., which holds one client, or
// one per node) is renewed by that Config's scheduler: a deadline heap (container/heap) of the
// handles keeping alive, one timer goroutine that sleeps until the earliest renewal is due, and at
// most [MaxRenewalsInFlight] (64) renewals in flight, each on a goroutine that ends with it. Renewals
// due together are sent concurrently, so rueidis's auto-pipelining writes them in few batches; a due
// renewal waits for a free slot when 64 are in flight. The timer goroutine exits once no handle is
// queued (the last keep-alive released, lost, expired or its ctx ended) and starts again with the
// next KeepAlive, so an idle process holds no goroutine for keep-alives. A handle keeping alive costs
// a few fixed fields, its place in the heap, and for a ctx that can end a context.AfterFunc
// registration: no goroutine, channel or timer of its own. The schedule, retries, ends, hook
// admissions and Release's wait are the contract's rows, unchanged by the sharing.
//
// The scheduler is per Config rather than per process so that a slow or unreachable server (whose
// renewals occupy their slots until each estimate ends) never delays the renewals of another
// factory's handles; a process with F factories keeping alive has at most F timer goroutines. Within
// one Config the bound is shared: a renewal holds its slot until it returns (at the latest when its
// handle's estimate ends), so while 64 renewals wait on a server that stopped answering (one stalled
// node of a Cluster, say) the factory's other due renewals wait for a slot too.
//
// # Concurrency
//
// Every method of a Handle and a Waiter is safe for concurrent use. A Handle owns no goroutine and at
// most one runtime timer (made when something waits on its Done or Context); its keep-alive runs on
// its Config's scheduler.
package ownership
