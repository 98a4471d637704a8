//go:build !linux || (!amd64 && !arm64)

package entry

// UnixFilter says refuseUnixSockets has a filter for this architecture:
// not here, so unix sockets made outside stay reachable below Landlock
// ABI 9, and the sandbox says so.
const UnixFilter = false

const (
	nativeArch, nativeSocket, x32Bit, compatSocketcall, compatSocket = 0, 0, 0, 0, 0
	ioURingSetup, compatIOURingSetup                                 = 0, 0
)
