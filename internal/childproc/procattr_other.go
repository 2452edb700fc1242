//go:build unix && !linux

package childproc

import "syscall"

// sysProcAttr puts the program in a process group of its own; only Linux
// can also tie its life to its parent's.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
