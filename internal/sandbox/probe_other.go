//go:build !linux

package sandbox

func kernelABI() (int, string) { return 0, "Landlock is a Linux feature" }
