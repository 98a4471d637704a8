//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// isTerminal is false where dsh cannot ask the terminal driver: prompts come
// from -p or stdin there, never an interactive session.
func isTerminal(any) bool { return false }
