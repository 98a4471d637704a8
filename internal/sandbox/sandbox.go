package sandbox

import (
	"fmt"
	"os"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/sandbox/entry"
)

// Codes of the sandbox.
const (
	// Unavailable: the kernel cannot enforce the rules asked for (no
	// Landlock, no user namespaces, no idmapped mounts, an ABI too old
	// for the network rules).
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
	// maxABI is the newest ABI this build knows; a newer kernel is used
	// at this level.
	maxABI = 11
)

// Network is what a sandboxed program may reach.
type Network string

// Network modes.
const (
	// NetworkOff: a network namespace with no interface up, plus
	// Landlock's network rules. The zero value.
	NetworkOff Network = ""
	// NetworkOn: the host's network.
	NetworkOn Network = "on"
	// NetworkProxied: a network namespace with only loopback up; a
	// listener on 127.0.0.1:ProxyPort inside it is handed to dsh
	// (Entry.Listener), which serves it as the egress proxy.
	NetworkProxied Network = "proxied"
)

// DefaultProxyPort is the proxy's port inside the sandbox.
const DefaultProxyPort = 3128

// DefaultID is the kernel uid and gid a command runs under when dsh is
// root: nobody's.
const DefaultID = 65534

// DefaultHomeFiles are git's user configuration files: without them git
// in the sandbox knows neither the user's name nor their settings. Nothing
// that commonly holds a secret (~/.ssh, ~/.git-credentials, ~/.aws).
var DefaultHomeFiles = []string{".gitconfig", ".config/git"}

// Weaken names what a caller accepts to lose where the kernel cannot give
// it; Status.Effective says which of them apply.
type Weaken uint8

// Weakenings, from least to most.
const (
	// SameUID: the command keeps dsh's kernel uid (root's, when dsh is
	// root: it owns root's files, although everything outside the
	// writable directories is read-only). Needed where idmapped mounts
	// are not available.
	SameUID Weaken = 1 << iota
	// NoLandlock: the namespaces without the Landlock layer.
	NoLandlock
	// NoNamespaces: Landlock and no_new_privs only, as before namespaces.
	NoNamespaces
	// OpenNetwork: the network stays reachable where it cannot be closed.
	OpenNetwork
	// AcceptAll accepts every weakening (sandbox.unavailable: warn).
	AcceptAll Weaken = 1<<iota - 1
)

// Rules say what a sandboxed program may do beyond reading and executing.
type Rules struct {
	// Writable lists absolute directories the program may write beneath.
	Writable []string
	// ReadOnly lists absolute paths inside Writable that stay read-only.
	// A missing one is created as an empty directory for the command's
	// run and covered read-only, so the command cannot create it either,
	// and removed after (see Entry.Err).
	ReadOnly []string
	// Hidden lists absolute paths the program sees empty: a directory as
	// an empty read-only one, a file as an empty read-only file. Secrets
	// (a token, recorded sessions) that the read-only mounts would still
	// let it read. A missing one is left (see ReadOnly to keep it so).
	// Only with namespaces; without, they stay readable as dsh's user.
	Hidden []string
	// Network is off (the zero value), on or proxied.
	Network Network
	// UnixSockets lets the command make unix sockets while the network
	// is not on, where Landlock (before ABI 9) cannot tell a socket made
	// inside from one made outside: it then reaches sockets outside by
	// their paths too (a user's D-Bus, tmux, ssh-agent, docker). Without
	// it, on such kernels, socket(AF_UNIX) fails; socket pairs and pipes
	// work either way.
	UnixSockets bool
	// ProxyPort is the proxy's port for NetworkProxied; 0 means
	// DefaultProxyPort.
	ProxyPort int
	// UID and GID are the kernel ids the command runs under when dsh is
	// root; 0 means DefaultID. Root itself cannot be chosen.
	UID, GID int
	// HomeFiles are the paths, relative to $HOME, the command may read
	// when dsh is root and $HOME lies in a directory only root may enter
	// (/root): everything else there is masked. nil means
	// DefaultHomeFiles; an empty, non-nil list shows none.
	HomeFiles []string
	// Accept is what may be weakened where the kernel cannot enforce the
	// rest; Attach refuses rules that need more.
	Accept Weaken
}

func (r Rules) ids() (int, int) {
	uid, gid := r.UID, r.GID
	if uid <= 0 {
		uid = DefaultID
	}
	if gid <= 0 {
		gid = DefaultID
	}
	return uid, gid
}

func (r Rules) proxyPort() int {
	if r.ProxyPort <= 0 {
		return DefaultProxyPort
	}
	return r.ProxyPort
}

// Status is what the running kernel, and dsh's place on it, offer.
type Status struct {
	// ABI is the Landlock ABI version in use (capped at the newest this
	// build knows); 0 means no Landlock.
	ABI int
	// Reason says why there is no Landlock when ABI is 0.
	Reason string
	// Namespaces: user, PID, mount, IPC, UTS and network namespaces can
	// be created and set up here; NSReason says why not.
	Namespaces bool
	NSReason   string
	// Root: dsh runs as root, so a command needs another kernel uid and
	// the writable directories idmapped mounts; Idmap says whether they
	// work (on the temp dir's file system), IdmapReason why not.
	Root        bool
	Idmap       bool
	IdmapReason string
}

// Probe asks the kernel what it offers: the Landlock ABI (one system
// call) and, once per process, whether a sandboxed start with namespaces
// (and, as root, idmapped mounts) works here.
func Probe() Status {
	abi, reason := kernelABI()
	if abi > maxABI {
		abi = maxABI
	}
	st := Status{ABI: abi, Reason: reason, Root: os.Geteuid() == 0}
	probeNamespaces(&st)
	return st
}

// Available reports whether the kernel has Landlock at all.
func (s Status) Available() bool { return s.ABI > 0 }

// Needed is what r loses under this kernel: the weakenings Effective
// applies.
func (s Status) Needed(r Rules) Weaken {
	var w Weaken
	if !s.Available() {
		w |= NoLandlock
	}
	if !s.Namespaces {
		w |= NoNamespaces
		if r.Network == NetworkProxied || (r.Network == NetworkOff && s.ABI < abiNetwork) {
			w |= OpenNetwork
		}
	} else if s.Root && !s.Idmap {
		w |= SameUID
	}
	return w
}

// Check says whether the kernel can enforce r with no more weakening than
// r.Accept: nil, or an error with code Unavailable that says what is
// missing.
func (s Status) Check(r Rules) error {
	missing := s.Needed(r) &^ r.Accept
	switch {
	case missing == 0:
		return nil
	case missing&NoNamespaces != 0:
		return errs.New(Unavailable, "the kernel refuses the user, PID and mount namespaces the sandbox needs ("+s.NSReason+")").WithReason("sandbox/no-namespaces")
	case missing&NoLandlock != 0:
		return errs.New(Unavailable, "the kernel offers no Landlock sandbox ("+s.Reason+")").WithReason("sandbox/no-landlock")
	case missing&SameUID != 0:
		return errs.New(Unavailable, "dsh runs as root and cannot give the command another uid: idmapped mounts are unavailable ("+s.IdmapReason+")").WithReason("sandbox/no-idmap")
	default:
		return errs.New(Unavailable, fmt.Sprintf("the network cannot be closed: no network namespace, and Landlock ABI %d cannot refuse TCP (needs ABI %d, Linux 6.7)", s.ABI, abiNetwork)).WithReason("sandbox/no-network-rules")
	}
}

// Effective is r as this kernel enforces it: r.Accept widened to every
// weakening it needs. Callers that accepted Check's error (a warning) run
// with this.
func (s Status) Effective(r Rules) Rules {
	r.Accept |= s.Needed(r)
	return r
}

// String is one line for logs and `dsh config check`: what the kernel
// can enforce.
func (s Status) String() string {
	var parts []string
	if s.Namespaces {
		p := "user, PID, mount, IPC, UTS and network namespaces"
		if s.Root {
			if s.Idmap {
				p += "; idmapped mounts (commands run under another uid than root)"
			} else {
				p += "; NO idmapped mounts: " + s.IdmapReason
			}
		}
		parts = append(parts, p)
	} else {
		parts = append(parts, "NO namespaces: "+s.NSReason)
	}
	if !s.Available() {
		parts = append(parts, "no Landlock: "+s.Reason)
		return strings.Join(parts, "; ")
	}
	parts = append(parts, fmt.Sprintf("Landlock ABI %d: file writes confinable", s.ABI))
	switch {
	case s.ABI >= abiUDP:
		parts = append(parts, "TCP and UDP restrictable")
	case s.ABI >= abiNetwork:
		parts = append(parts, fmt.Sprintf("TCP bind/connect restrictable, UDP not (needs ABI %d)", abiUDP))
	default:
		parts = append(parts, fmt.Sprintf("network not restrictable by Landlock (needs ABI %d)", abiNetwork))
	}
	return strings.Join(parts, "; ")
}

// Describe is one line saying what is in force for r under this kernel,
// and, when weakened, exactly what is not isolated.
func (s Status) Describe(r Rules) string {
	w := s.Needed(r)
	if w&NoLandlock != 0 && w&NoNamespaces != 0 {
		return "no sandbox: " + s.Reason + "; " + s.NSReason
	}
	var b strings.Builder
	if w&NoNamespaces == 0 {
		b.WriteString("namespaces (user, PID with its own /proc, mount, IPC, UTS")
		if r.Network != NetworkOn {
			b.WriteString(", network")
		}
		b.WriteString("), no capabilities, no_new_privs")
		switch {
		case !s.Root:
			b.WriteString(", dsh's own uid")
		case w&SameUID != 0:
			b.WriteString(", but the kernel uid stays root (NOT isolated: root's files outside the writable directories are read-only yet owned and readable, root-owned sockets reachable; " + s.IdmapReason + ")")
		default:
			uid, _ := r.ids()
			fmt.Fprintf(&b, ", kernel uid %d (idmapped writable directories)", uid)
		}
		fmt.Fprintf(&b, "; read-only everywhere but %s", strings.Join(r.Writable, ", "))
		if len(r.ReadOnly) > 0 {
			fmt.Fprintf(&b, " (read-only inside them: %s)", strings.Join(r.ReadOnly, ", "))
		}
	} else {
		fmt.Fprintf(&b, "NO namespaces (%s; NOT isolated: dsh's /proc and environment as root, file metadata outside the writable directories, capabilities, processes left running after dsh dies)", s.NSReason)
		fmt.Fprintf(&b, "; writes only beneath %s", strings.Join(r.Writable, ", "))
	}
	if s.Available() {
		fmt.Fprintf(&b, "; Landlock ABI %d", s.ABI)
	} else {
		b.WriteString("; NO Landlock (" + s.Reason + ")")
	}
	switch {
	case r.Network == NetworkOn:
		b.WriteString("; network open")
	case w&OpenNetwork != 0 && r.Network == NetworkProxied:
		b.WriteString("; network NOT restricted (the egress proxy needs a network namespace)")
	case w&OpenNetwork != 0:
		fmt.Fprintf(&b, "; network NOT restricted (no network namespace, and Landlock needs ABI %d)", abiNetwork)
	case r.Network == NetworkProxied && w&NoNamespaces == 0:
		fmt.Fprintf(&b, "; network only through dsh's egress proxy (127.0.0.1:%d); unix sockets made outside %s", r.proxyPort(), s.unixSockets(r))
	case w&NoNamespaces == 0:
		b.WriteString("; network off (a network namespace with nothing up); unix sockets made outside " + s.unixSockets(r))
	default:
		b.WriteString("; network off: " + s.closedNetwork())
	}
	if w&NoNamespaces != 0 && s.ABI < abiScoped {
		fmt.Fprintf(&b, "; signals to outside processes not restricted (needs ABI %d)", abiScoped)
	}
	return b.String()
}

func (s Status) unixSockets(r Rules) string {
	switch {
	case s.ABI >= abiUnix:
		return "refused"
	case r.UnixSockets:
		return fmt.Sprintf("NOT refused (sandbox.unix_sockets is on; Landlock needs ABI %d to refuse only those)", abiUnix)
	case entry.UnixFilter:
		return fmt.Sprintf("refused (the command may make no unix socket at all: Landlock needs ABI %d to tell them apart)", abiUnix)
	}
	return fmt.Sprintf("NOT refused (needs Landlock ABI %d)", abiUnix)
}

// closedNetwork says what the network rules of this ABI refuse, and what
// they leave open, without a network namespace.
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
	if s.ABI >= abiUnix || entry.UnixFilter {
		refused = append(refused, "unix sockets made outside")
	} else {
		open = append(open, fmt.Sprintf("unix sockets made outside (needs ABI %d)", abiUnix))
	}
	open = append(open, "multipath TCP")
	return strings.Join(refused, ", ") + " refused; not restricted: " + strings.Join(open, ", ")
}

// netMode is the entry's word for r's network.
func netMode(r Rules, w Weaken) string {
	switch {
	case r.Network == NetworkOn, r.Network == NetworkProxied && w&NoNamespaces != 0:
		return entry.NetOn
	case r.Network == NetworkProxied:
		return entry.NetProxied
	}
	return entry.NetOff
}
