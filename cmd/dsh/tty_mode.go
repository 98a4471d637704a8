//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// windowWidth is the number of columns of terminal f, or 0.
func windowWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// echoSwitch returns a function that turns terminal f's echo on or off,
// leaving its other settings (line editing, Ctrl-C) as they are, or nil
// when f is no terminal.
func echoSwitch(f *os.File) func(on bool) {
	fd := int(f.Fd())
	if _, err := unix.IoctlGetTermios(fd, ioctlGetTermios); err != nil {
		return nil
	}
	return func(on bool) {
		t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
		if err != nil {
			return
		}
		if on {
			t.Lflag |= unix.ECHO
		} else {
			t.Lflag &^= unix.ECHO
		}
		_ = unix.IoctlSetTermios(fd, ioctlSetTermios, t)
	}
}
