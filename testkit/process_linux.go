package testkit

import "syscall"

// sysProcAttr makes the kernel SIGKILL the server when the thread that started it dies, so that
// a killed or timed-out test binary leaves no server behind. (Pdeathsig follows the starting OS
// thread; the Go runtime only retires threads of goroutines that exit while locked to them.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
