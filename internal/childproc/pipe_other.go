//go:build !unix

package childproc

// isPipe is false outside Unix, where dsh passes no host pipe.
func isPipe(int) bool { return false }
