package ownership

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/coordkit/coordkit/luakit"
)

// The setters below validate a primitive's With* option once, with one message for every module, so
// that each module's option is a one-line call. They return an error naming the module (Config.Name)
// and leave c unchanged when the value is out of range. The error is a [*luakit.ConfigError], so it
// matches luakit.ErrInvalidConfig.

// MinRenewFraction is the smallest renew fraction accepted: at most 20 renewals per TTL, so a tiny
// value cannot turn a keep-alive into a tight loop of renewals.
const MinRenewFraction = 0.05

// SetRenewFraction sets RenewFraction; it must be in [MinRenewFraction, 0.9] (0.05 to 0.9).
func (c *Config) SetRenewFraction(fraction float64) error {
	if !(fraction >= MinRenewFraction && fraction <= 0.9) {
		return luakit.InvalidConfig(c.name(), "renew fraction %v outside [0.05, 0.9]", fraction)
	}
	c.RenewFraction = fraction
	return nil
}

// SetCleanupTimeout sets CleanupTimeout; it must be positive.
func (c *Config) SetCleanupTimeout(d time.Duration) error {
	if d <= 0 {
		return luakit.InvalidConfig(c.name(), "cleanup timeout %v must be positive", d)
	}
	c.CleanupTimeout = d
	return nil
}

// SetRetryDelay sets RetryDelay; it must be positive.
func (c *Config) SetRetryDelay(d time.Duration) error {
	if d <= 0 {
		return luakit.InvalidConfig(c.name(), "retry delay %v must be positive", d)
	}
	c.RetryDelay = d
	return nil
}

// SetLogger sets Logger; nil selects the default, slog.Default(). It never fails (the error keeps
// the shape of the other setters).
func (c *Config) SetLogger(l *slog.Logger) error {
	c.Logger = l
	return nil
}

// SetReplicaAck sets Ack after validating it ([luakit.ReplicaAck.Validate]); the zero value turns it
// off. For a primitive's WithReplicaAck option.
func (c *Config) SetReplicaAck(a luakit.ReplicaAck) error {
	if err := a.Validate(c.name()); err != nil {
		return err
	}
	c.Ack = a
	c.aofProbe = nil
	if a.AOF {
		c.aofProbe = new(luakit.FeatureCache)
	}
	return nil
}

// CheckAck returns nil unless Ack asks for WAITAOF (set through [Config.SetReplicaAck]) and the server
// behind client lacks it: then a [*luakit.UnsupportedError] (matching luakit.ErrUnsupported), or the
// probe's error. It probes once per Config (COMMAND INFO WAITAOF, one round trip) and caches a definite
// answer, so that an acquisition is refused before it writes anything. [Config.Send] and
// [Config.SendTracked] call it; primitives that send acknowledged writes themselves call it first.
func (c *Config) CheckAck(ctx context.Context, client rueidis.Client) error {
	if c.aofProbe == nil || !c.Ack.AOF {
		return nil
	}
	return c.aofProbe.Require(ctx, client, luakit.WaitAOF)
}
