package execplugin

import "strconv"

// fdPath names descriptor fd of the process that opens it. The kernel
// resolves it in the child, after the fork, where fd is the pinned file.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
