//go:build !linux

package execplugin

import "strconv"

// fdPath names descriptor fd of the process that opens it (the BSDs and
// macOS spell /proc/self/fd as /dev/fd).
func fdPath(fd int) string { return "/dev/fd/" + strconv.Itoa(fd) }
