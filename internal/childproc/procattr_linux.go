package childproc

import "syscall"

// sysProcAttr puts the program in a process group of its own and has the
// kernel kill it when its parent dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
