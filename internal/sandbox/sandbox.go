package sandbox

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Codes of the sandbox.
const (
	// Unavailable: the kernel cannot enforce the rules asked for (no
	// Landlock, or an ABI too old for the network rules).
	Unavailable errs.Code = "SANDBOX_UNAVAILABLE"
	// EntryFailed: the child could not enter the sandbox, so the program
	// never ran.
	EntryFailed errs.Code = "SANDBOX_ENTRY_FAILED"
)

// Landlock ABI versions that matter here.
const (
	// abiNetwork restricts TCP bind and connect.
	abiNetwork = 4
	// abiScoped refuses signals and abstract unix sockets across the
	// sandbox's edge.
	abiScoped = 6
	// abiUnix refuses connections to unix sockets made outside.
	abiUnix = 9
	// abiUDP restricts UDP bind, connect and send.
	abiUDP = 10
	// maxABI is the newest ABI go-landlock knows; a newer kernel is used
	// at this level.
	maxABI = 11
)

// Rules say what a sandboxed program may do beyond reading and executing.
type Rules struct {
	// Writable lists absolute directories the program may write beneath.
	Writable []string
	// Network allows network access; false refuses what the ABI can
	// restrict (see Status.Describe).
	Network bool
}

// Status is what the running kernel offers.
type Status struct {
	// ABI is the Landlock ABI version in use (capped at the newest this
	// build knows); 0 means no Landlock.
	ABI int
	// Reason says why there is no Landlock when ABI is 0.
	Reason string
}

// Available reports whether the kernel has Landlock at all.
func (s Status) Available() bool { return s.ABI > 0 }

// Probe asks the kernel which Landlock ABI it offers. It is cheap (one
// system call) and may be called at any time.
func Probe() Status {
	abi, reason := kernelABI()
	if abi > maxABI {
		abi = maxABI
	}
	return Status{ABI: abi, Reason: reason}
}

// String is one line for logs and `dsh config check`: what the kernel
// can enforce.
func (s Status) String() string {
	if !s.Available() {
		return "no Landlock sandbox: " + s.Reason
	}
	parts := []string{fmt.Sprintf("Landlock ABI %d: file writes confinable", s.ABI)}
	switch {
	case s.ABI >= abiUDP:
		parts = append(parts, "TCP and UDP restrictable")
	case s.ABI >= abiNetwork:
		parts = append(parts, fmt.Sprintf("TCP bind/connect restrictable, UDP not (needs ABI %d)", abiUDP))
	default:
		parts = append(parts, fmt.Sprintf("network not restrictable (needs ABI %d)", abiNetwork))
	}
	return strings.Join(parts, "; ")
}

// Check says whether the kernel can enforce r as asked: nil, or an error
// with code Unavailable that says what is missing.
func (s Status) Check(r Rules) error {
	if !s.Available() {
		return errs.New(Unavailable, "the kernel offers no Landlock sandbox ("+s.Reason+")").WithReason("sandbox/no-landlock")
	}
	if !r.Network && s.ABI < abiNetwork {
		return errs.New(Unavailable, fmt.Sprintf("network: false needs Landlock ABI %d (Linux 6.7) to refuse TCP connections; this kernel offers ABI %d", abiNetwork, s.ABI)).WithReason("sandbox/no-network-rules")
	}
	return nil
}

// Effective is r as the kernel enforces it: the network stays open when
// the ABI cannot close it. Callers that accepted Check's error (a
// warning) run with this.
func (s Status) Effective(r Rules) Rules {
	if s.ABI < abiNetwork {
		r.Network = true
	}
	return r
}

// Describe is one line saying what is in force for r under this kernel.
func (s Status) Describe(r Rules) string {
	if !s.Available() {
		return "no sandbox: " + s.Reason
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Landlock ABI %d: writes only beneath %s", s.ABI, strings.Join(r.Writable, ", "))
	switch {
	case r.Network:
		b.WriteString("; network open")
	case s.ABI < abiNetwork:
		fmt.Fprintf(&b, "; network NOT restricted (needs ABI %d)", abiNetwork)
	default:
		b.WriteString("; network off: " + s.closedNetwork())
	}
	if s.ABI < abiScoped {
		fmt.Fprintf(&b, "; signals to outside processes not restricted (needs ABI %d)", abiScoped)
	}
	return b.String()
}

// closedNetwork says what the network rules of this ABI refuse, and what
// they leave open.
func (s Status) closedNetwork() string {
	refused := []string{"TCP bind/connect"}
	var open []string
	if s.ABI >= abiUDP {
		refused = append(refused, "UDP")
	} else {
		open = append(open, fmt.Sprintf("UDP (needs ABI %d)", abiUDP))
	}
	if s.ABI >= abiScoped {
		refused = append(refused, "abstract unix sockets")
	} else {
		open = append(open, fmt.Sprintf("abstract unix sockets (needs ABI %d)", abiScoped))
	}
	if s.ABI >= abiUnix {
		refused = append(refused, "unix sockets made outside")
	} else {
		open = append(open, fmt.Sprintf("unix sockets made outside (needs ABI %d)", abiUnix))
	}
	open = append(open, "multipath TCP")
	return strings.Join(refused, ", ") + " refused; not restricted: " + strings.Join(open, ", ")
}
