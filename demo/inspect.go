package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/coordkit/coordkit/coordctl"
	"github.com/coordkit/coordkit/counter"
	"github.com/coordkit/coordkit/lock"
	"github.com/coordkit/coordkit/semaphore"
)

// The inspection step: the demo takes a lock, counts a quota and holds an export permit under its own
// prefix, then prints what `coordctl <primitive> inspect` shows of those keys, through coordctl's own
// entry point (coordctl.Run), and checks the JSON against the state it created.
const (
	inspectLock  = "report:daily"
	inspectQuota = "quota:inspect"
	inspectSem   = "exports:inspect"
)

func init() { steps = append(steps, step{name: "coordctl inspection", run: inspectStep}) }

func inspectStep(ctx context.Context, e *env) (stepResult, error) {
	var res stepResult
	c, _, err := e.trackedClient()
	if err != nil {
		return res, err
	}
	defer c.Close()
	lk, err := lock.New(c, lock.WithKeyPrefix(e.prefix))
	if err != nil {
		return res, err
	}
	held, err := lk.TryAcquire(ctx, inspectLock, 30*time.Second)
	if err != nil {
		return res, err
	}
	defer held.Close()
	st, err := counter.New(c, counter.WithKeyPrefix(e.prefix))
	if err != nil {
		return res, err
	}
	defer st.Close(context.WithoutCancel(ctx))
	if _, err := st.IncrementWithExpire(ctx, inspectQuota, 3, time.Minute); err != nil {
		return res, err
	}
	sem, err := semaphore.New(c, inspectSem, 2, semaphore.WithKeyPrefix(e.prefix))
	if err != nil {
		return res, err
	}
	defer sem.Close(context.WithoutCancel(ctx))
	permit, err := sem.TryAcquire(ctx, 30*time.Second)
	if err != nil {
		return res, err
	}
	defer permit.Close()
	defer func() { _ = c.Do(ctx, c.B().Del().Key(e.prefix+inspectQuota).Build()).Error() }()

	u := url.URL{Scheme: "redis", Host: e.option.InitAddress[0]}
	if e.option.TLSConfig != nil {
		u.Scheme = "rediss"
	}
	if e.option.Username != "" || e.option.Password != "" {
		u.User = url.UserPassword(e.option.Username, e.option.Password)
	}
	base := []string{"--url", u.String(), "--prefix", e.prefix}
	ctl := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		if code := coordctl.Run(ctx, append(append([]string{}, base...), args...), &out, &errb); code != coordctl.ExitOK {
			return "", fmt.Errorf("coordctl %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errb.String()))
		}
		return out.String(), nil
	}
	for _, args := range [][]string{
		{"lock", "inspect", inspectLock},
		{"counter", "inspect", inspectQuota},
		{"semaphore", "inspect", inspectSem},
	} {
		out, err := ctl(args...)
		if err != nil {
			return res, err
		}
		res.add("$ coordctl", "--prefix %s %s", e.prefix, strings.Join(args, " "))
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			res.add("", "%s", line)
		}
	}

	var lv struct {
		Exists       bool  `json:"exists"`
		FencingToken int64 `json:"fencing_token"`
	}
	var cv struct {
		Value       int64 `json:"value"`
		RemainingMS int64 `json:"remaining_ms"`
	}
	var sv struct {
		Capacity int64 `json:"capacity"`
		Active   int64 `json:"active"`
		Free     int64 `json:"free"`
	}
	for _, x := range []struct {
		args []string
		into any
	}{
		{[]string{"--json", "lock", "inspect", inspectLock}, &lv},
		{[]string{"--json", "counter", "inspect", inspectQuota}, &cv},
		{[]string{"--json", "semaphore", "inspect", inspectSem}, &sv},
	} {
		out, err := ctl(x.args...)
		if err != nil {
			return res, err
		}
		if err := json.Unmarshal([]byte(out), x.into); err != nil {
			return res, fmt.Errorf("coordctl %s: %w", strings.Join(x.args, " "), err)
		}
	}
	res.check("lock shown held with the lease's fencing token", lv.Exists && lv.FencingToken == held.FencingToken(),
		"exists %v, fencing token %d, token %d", lv.Exists, lv.FencingToken, held.FencingToken())
	res.check("counter shown with its value and a TTL", cv.Value == 3 && cv.RemainingMS > 0 && cv.RemainingMS <= 60000,
		"value %d, remaining %dms", cv.Value, cv.RemainingMS)
	res.check("semaphore shown with 1 of 2 permits free", sv.Capacity == 2 && sv.Active == 1 && sv.Free == 1,
		"capacity %d, active %d, free %d", sv.Capacity, sv.Active, sv.Free)
	res.summary = fmt.Sprintf("lock held (fencing token %d), quota %d, %d/%d permits free", lv.FencingToken, cv.Value, sv.Free, sv.Capacity)
	return res, nil
}
