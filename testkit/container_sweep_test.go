package testkit

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envSweepHelper makes TestSweepHelper start a container, print its id and SIGKILL its own process.
const envSweepHelper = "COORDKIT_TESTKIT_SWEEP_HELPER"

// TestSweepHelper is the test binary that gets killed in TestSweepAfterKilledBinary (a no-op otherwise).
func TestSweepHelper(t *testing.T) {
	if os.Getenv(envSweepHelper) != "1" {
		t.Skip("helper of TestSweepAfterKilledBinary")
	}
	s, err := Launch(context.Background(), firstAvailable(t), WithStartTimeout(60*time.Second))
	require.NoError(t, err)
	c := s.inst.(*ctr)
	os.Stdout.WriteString("CONTAINER " + c.id + "\n")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // no cleanup runs: the container stays
	select {}
}

// TestSweepAfterKilledBinary: a test binary killed with SIGKILL leaves its container behind (no
// reaper can run without a registry); the sweep of the next run (SweepContainers, also run before
// testkit's first container of a process) removes it, and leaves the containers of a running binary
// (this one) alone.
func TestSweepAfterKilledBinary(t *testing.T) {
	ctx := context.Background()
	if err := probeEngine(ctx); err != nil {
		FailOrSkip(t, err)
	}
	t.Setenv(EnvBackend, BackendContainer)
	mine := Start(t, firstAvailable(t), WithStartTimeout(60*time.Second)) // a live owner's container

	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envSweepHelper+"=1", EnvBackend+"="+BackendContainer)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var id string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONTAINER "); ok {
			id = v
		}
	}
	werr := cmd.Wait()
	require.NotEmpty(t, id, "the helper printed no container id (exit: %v)", werr)
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee)
	require.Equal(t, "signal: killed", ee.Error())

	cli, _, err := connectEngine(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	_, err = cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	require.NoError(t, err, "the killed binary's container is left behind until a sweep")
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
	})

	n, err := SweepContainers(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 1)
	_, err = cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	assert.Error(t, err, "the sweep removes the container of the killed binary")
	_, err = mine.Do(ctx, "PING")
	assert.NoError(t, err, "the sweep leaves the containers of running binaries alone")
}
