//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "os"

// isTerminal is false where dsh cannot ask the terminal driver: prompts come
// from -p or stdin there, never an interactive session.
func isTerminal(any) bool { return false }

func windowWidth(*os.File) int { return 0 }

func echoSwitch(*os.File) func(bool) { return nil }
