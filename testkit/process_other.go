//go:build !linux

package testkit

import "syscall"

// sysProcAttr: without Pdeathsig (Linux only) a server can outlive a killed test binary; Close
// and t.Cleanup still stop it on a normal exit.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
