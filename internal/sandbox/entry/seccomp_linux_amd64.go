package entry

// UnixFilter says refuseUnixSockets has a filter for this architecture.
const UnixFilter = true

const (
	nativeArch         = 0xc000003e // AUDIT_ARCH_X86_64
	nativeSocket       = 41
	x32Bit             = 0x40000000 // __X32_SYSCALL_BIT
	compatSocketcall   = 102        // i386
	compatSocket       = 359
	ioURingSetup       = 425 // the same on every architecture since Linux 5.1
	compatIOURingSetup = 425 // i386
)
