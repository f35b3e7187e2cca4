package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/moby/client"
)

// Labels that tie a container (or network) to the test binary that made it, so that the leftovers of
// a killed binary can be found and removed: testcontainers' reaper (Ryuk) cannot run without a
// registry, so testkit sweeps instead (see SweepContainers).
const (
	// labelOwner is "<hostname>/<pid>" of the test binary that created the container.
	labelOwner = labelTestkit + ".owner"
)

// ownerLabel is this process's owner label value.
func ownerLabel() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

// testkitLabels are the labels of every container and network testkit creates.
func testkitLabels(extra map[string]string) map[string]string {
	l := map[string]string{labelTestkit: "1", labelOwner: ownerLabel()}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

// ownerGone reports whether owner ("<hostname>/<pid>") names a process of this machine that no longer
// runs. An owner of another machine, or one that cannot be parsed, is never gone: it is not ours to
// judge.
func ownerGone(owner string) bool {
	h, p, ok := strings.Cut(owner, "/")
	host, _ := os.Hostname()
	if !ok || h != host {
		return false
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// SweepContainers removes the containers and networks that testkit made for a test binary of this
// machine that no longer runs (a binary killed before its cleanups ran: SIGKILL, a go test timeout):
// every one labelled org.coordkit.testkit whose org.coordkit.testkit.owner ("<hostname>/<pid>")
// names a process that is gone. Containers of running binaries (other packages testing at the same
// time) and of other machines are left alone. It returns how many containers it removed.
//
// testkit runs it once per process before its first container starts, so the next run cleans up
// after a killed one; call it from TestMain to clean up at the start of a package's tests too.
// Without a Docker engine it returns 0 and an error wrapping ErrUnavailable.
func SweepContainers(ctx context.Context) (int, error) {
	cli, _, err := connectEngine(ctx)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return sweep(ctx, cli)
}

func sweep(ctx context.Context, cli *client.Client) (int, error) {
	f := client.Filters{}
	f = f.Add("label", labelTestkit)
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("testkit: sweep: listing containers: %w", err)
	}
	removed := 0
	var errs []error
	for _, c := range list.Items {
		if !ownerGone(c.Labels[labelOwner]) {
			continue
		}
		if _, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("removing container %.12s: %w", c.ID, err))
			continue
		}
		removed++
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing networks: %w", err))
	} else {
		for _, n := range nets.Items {
			if !ownerGone(n.Labels[labelOwner]) {
				continue
			}
			if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("removing network %.12s: %w", n.ID, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("testkit: sweep: %w", err)
	}
	return removed, nil
}

var sweepOnce sync.Once

// sweepBeforeFirstContainer runs sweep once per process (its errors are not fatal: a leftover is
// only a leftover).
func sweepBeforeFirstContainer(ctx context.Context, cli *client.Client) {
	sweepOnce.Do(func() { _, _ = sweep(ctx, cli) })
}
