package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// processBackend starts server binaries (Binary) as child processes on free loopback ports.
type processBackend struct{}

func (processBackend) name() string { return BackendProcess }

func (processBackend) launch(ctx context.Context, target Target, cfg *config) (*Server, error) {
	p, err := newProc(target, cfg, false)
	if err != nil {
		return nil, err
	}
	if err := p.startFresh(ctx); err != nil {
		_ = p.close()
		return nil, err
	}
	s := &Server{Addr: p.addr(), Target: target, Backend: BackendProcess, inst: p}
	ictx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	if err := s.fillInfo(ictx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

const (
	maxStartAttempts = 3
	stopGrace        = 5 * time.Second
	logTailLines     = 20
)

// proc is one server process, restartable on the same port.
type proc struct {
	target  Target
	bin     string
	dir     string
	logPath string // the server's --logfile
	outPath string // its stdout/stderr (errors before the log file opens)
	cfg     *config
	cluster bool
	// sentinelConf, when set, makes the process a Sentinel: the content of its config file (written
	// once; the Sentinel rewrites it with what it learns, and a restart keeps it).
	sentinelConf string

	mu      sync.Mutex
	port    int
	busPort int // cluster bus port (cluster nodes only)
	cur     *run
	closed  bool
}

// run is one execution of the binary.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and been reaped
	err  error         // cmd.Wait's result, valid after done
}

func (r *run) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func newProc(target Target, cfg *config, cluster bool) (*proc, error) {
	bin, err := Binary(target)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "coordkit-"+string(target)+"-")
	if err != nil {
		return nil, fmt.Errorf("testkit: temp dir: %w", err)
	}
	return &proc{
		target:  target,
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "server.log"),
		outPath: filepath.Join(dir, "stdout.log"),
		cfg:     cfg,
		cluster: cluster,
	}, nil
}

func (p *proc) addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
}

func (p *proc) args(port, busPort int) []string {
	if p.sentinelConf != "" {
		return append([]string{
			filepath.Join(p.dir, "sentinel.conf"), "--sentinel",
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", p.dir,
			"--protected-mode", "no",
			"--daemonize", "no",
			"--logfile", p.logPath,
		}, p.cfg.args...)
	}
	a := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", p.dir,
		"--protected-mode", "no",
		"--daemonize", "no",
		"--enable-debug-command", "yes",
		"--logfile", p.logPath,
	}
	if p.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(p.dir, "nodes.conf"),
			"--cluster-node-timeout", strconv.FormatInt(p.cfg.clusterNodeTimeout().Milliseconds(), 10),
			// Any replica may take over, however long its link was down (fault tests kill primaries).
			"--cluster-replica-validity-factor", "0",
			"--cluster-port", strconv.Itoa(busPort),
		)
	}
	return append(a, p.cfg.args...)
}

// spawn starts the binary; the process is reaped by a goroutine that closes run.done.
func (p *proc) spawn(port, busPort int) (*run, error) {
	if p.sentinelConf != "" {
		conf := filepath.Join(p.dir, "sentinel.conf")
		if _, err := os.Stat(conf); err != nil {
			if err := os.WriteFile(conf, []byte(p.sentinelConf), 0o600); err != nil {
				return nil, fmt.Errorf("testkit: %w", err)
			}
		}
	}
	out, err := os.OpenFile(p.outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("testkit: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(p.bin, p.args(port, busPort)...)
	cmd.Dir = p.dir
	cmd.Stdout = out
	cmd.Stderr = out
	// The server must not outlive the test binary (a test timeout, a SIGKILL): Pdeathsig on Linux.
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testkit: starting %s: %w", p.bin, err)
	}
	r := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	return r, nil
}

var errExitedEarly = errors.New("server exited during start")

// waitReady waits until the server of r answers PING on port and is this very process (INFO
// server process_id), so that a server of someone else on a raced port is never mistaken for it.
func (p *proc) waitReady(ctx context.Context, r *run, port int) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.startTimeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var last error
	for {
		if r.exited() {
			return fmt.Errorf("%w (%v)", errExitedEarly, r.err)
		}
		reply, err := rawDo(ctx, addr, time.Second, "PING")
		if err == nil && reply == "PONG" {
			info, ierr := rawDo(ctx, addr, time.Second, "INFO", "server")
			if s, ok := info.(string); ierr == nil && ok {
				if parseInfo(s)["process_id"] == strconv.Itoa(r.cmd.Process.Pid) {
					return nil
				}
				err = errors.New("another server answers on this port")
			} else {
				err = ierr
			}
		}
		if err != nil {
			last = err
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("server not ready after %v: %v (last probe: %v)", p.cfg.startTimeout, ctx.Err(), last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startFresh starts the server on a new free port, retrying with another port (up to 3 attempts)
// when the process exits during start, as it does when another process took the port first.
func (p *proc) startFresh(ctx context.Context) error {
	var lastErr error
	for attempt := 1; attempt <= maxStartAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		busPort := 0
		if p.cluster {
			if busPort, err = freePort(); err != nil {
				return err
			}
		}
		r, err := p.spawn(port, busPort)
		if err != nil {
			return err
		}
		err = p.waitReady(ctx, r, port)
		if err == nil {
			p.mu.Lock()
			p.port, p.busPort, p.cur = port, busPort, r
			p.mu.Unlock()
			return nil
		}
		stopRun(r, 0)
		lastErr = p.startError(port, err)
		if !errors.Is(err, errExitedEarly) || ctx.Err() != nil {
			return lastErr
		}
	}
	return lastErr
}

func (p *proc) startError(port int, err error) error {
	return fmt.Errorf("testkit: %s (%s) on 127.0.0.1:%d: %v%s", p.target, p.bin, port, err, p.logTail())
}

// logTail returns the last lines of the server log and of its stdout, for start errors.
func (p *proc) logTail() string {
	var b strings.Builder
	for _, f := range []string{p.logPath, p.outPath} {
		data, err := os.ReadFile(f)
		if err != nil || len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > logTailLines {
			lines = lines[len(lines)-logTailLines:]
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", f, strings.Join(lines, "\n"))
	}
	return b.String()
}

// stopRun ends a run: SIGCONT (a paused process cannot act on SIGTERM), SIGTERM, and SIGKILL
// after grace (at once when grace is 0); it returns once the process is reaped.
func stopRun(r *run, grace time.Duration) {
	if r == nil || r.exited() {
		return
	}
	if grace > 0 {
		_ = r.cmd.Process.Signal(syscall.SIGCONT)
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-r.done:
			return
		case <-t.C:
		}
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

func (p *proc) running() (*run, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("testkit: server is closed")
	}
	if p.cur == nil || p.cur.exited() {
		return nil, errors.New("testkit: server process is not running")
	}
	return p.cur, nil
}

func (p *proc) pid() int {
	r, err := p.running()
	if err != nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (p *proc) signal(sig syscall.Signal) error {
	r, err := p.running()
	if err != nil {
		return err
	}
	return r.cmd.Process.Signal(sig)
}

func (p *proc) pause() error  { return p.signal(syscall.SIGSTOP) }
func (p *proc) resume() error { return p.signal(syscall.SIGCONT) }

func (p *proc) kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("testkit: server is closed")
	}
	stopRun(p.cur, 0)
	return nil
}

// restart kills the process (if it runs) and starts the binary again on the same port(s). Nothing
// is persisted (no RDB save, no AOF), so the new process has no data and no scripts. When the port
// cannot be bound again at once, it retries until the start timeout.
func (p *proc) restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("testkit: server is closed")
	}
	stopRun(p.cur, 0)
	for _, f := range []string{"dump.rdb", "appendonlydir", "appendonly.aof"} {
		_ = os.RemoveAll(filepath.Join(p.dir, f))
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.startTimeout)
	defer cancel()
	for {
		r, err := p.spawn(p.port, p.busPort)
		if err != nil {
			return err
		}
		err = p.waitReady(ctx, r, p.port)
		if err == nil {
			p.cur = r
			return nil
		}
		stopRun(r, 0)
		if !errors.Is(err, errExitedEarly) || ctx.Err() != nil {
			return fmt.Errorf("testkit: restart: %w", p.startError(p.port, err))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testkit: restart: %w", p.startError(p.port, err))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close stops the process (SIGTERM, SIGKILL after 5s) and removes the temporary directory.
func (p *proc) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	stopRun(p.cur, stopGrace)
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("testkit: removing %s: %w", p.dir, err)
	}
	return nil
}

// Ports handed out by freePort are not handed out again by this process, so that concurrent
// starts in one test binary never pick the same port.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// freePort returns a loopback port that was free a moment ago (listen on 127.0.0.1:0, close).
// The server may still lose a race for it; startFresh retries with another port.
func freePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("testkit: finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		portsMu.Lock()
		taken := ports[port]
		ports[port] = true
		portsMu.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, errors.New("testkit: no free port found")
}
