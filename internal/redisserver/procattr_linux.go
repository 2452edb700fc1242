package redisserver

import "syscall"

// sysProcAttr puts the server in a process group of its own (a Ctrl-C
// meant for the caller does not reach it before the caller's cleanup) and
// has the kernel kill it when its parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
