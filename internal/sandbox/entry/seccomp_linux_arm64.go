package entry

// UnixFilter says refuseUnixSockets has a filter for this architecture.
const UnixFilter = true

const (
	nativeArch         = 0xc00000b7 // AUDIT_ARCH_AARCH64
	nativeSocket       = 198
	x32Bit             = 0          // no such ABI: the test never matches
	compatSocketcall   = 0xffffffff // 32-bit ARM (EABI) has none
	compatSocket       = 281
	ioURingSetup       = 425 // the same on every architecture since Linux 5.1
	compatIOURingSetup = 425 // 32-bit ARM
)
