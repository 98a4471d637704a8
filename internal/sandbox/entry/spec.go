package entry

// Marker is the argument that makes a process started from dsh's own
// executable enter the sandbox instead of running dsh.
const Marker = "__dsh_sandbox_enter__"

// HoldMarker makes such a process wait for end-of-file on its stdin and
// exit: dsh keeps the user namespace it was started in for idmapped
// mounts.
const HoldMarker = "__dsh_sandbox_hold__"

// ExitFailed is the child's exit status when it could not enter the
// sandbox; the message itself travels over the control socket, so the
// status of the program (which may well be 125) is never mistaken for it.
const ExitFailed = 125

// Network modes of a Spec.
const (
	// NetOff: a network namespace with nothing up, plus Landlock's
	// network rules.
	NetOff = "off"
	// NetOn: the host's network.
	NetOn = "on"
	// NetProxied: a network namespace with only loopback up and a
	// listener on 127.0.0.1:ProxyPort handed back to dsh.
	NetProxied = "proxied"
)

// Messages on the control socket, as their first byte.
const (
	// MsgListener (child to dsh) carries the proxy listener.
	MsgListener = 'L'
	// MsgError (child to dsh) is why the child gives up; the text follows.
	MsgError = 'E'
)

// Mount is a directory attached in the sandbox at its own path.
type Mount struct {
	Path string `json:"path"`
	// FD is the descriptor of a detached mount dsh prepared (idmapped,
	// as only a privileged dsh can); 0: the child clones the path itself
	// before the rest is made read-only.
	FD int `json:"fd,omitempty"`
}

// Spec is what the parent tells the child, as one JSON argument.
type Spec struct {
	// ABI is the Landlock ABI to enforce, strictly.
	ABI int `json:"abi"`
	// Writable directories, for Landlock; the namespaced sandbox also
	// attaches them through Mounts.
	Writable []string `json:"writable"`
	Network  string   `json:"network"`
	// ProxyPort is the listener's port when Network is NetProxied.
	ProxyPort int `json:"proxy_port,omitempty"`
	// CtlFD is the control socket's descriptor in the child.
	CtlFD int `json:"ctl_fd"`
	// Namespaces: the child is the first process of new user, PID,
	// mount, IPC and UTS namespaces (and a network namespace unless
	// Network is NetOn) and sets up the view below. Without it only
	// Landlock and no_new_privs apply.
	Namespaces bool `json:"namespaces,omitempty"`
	// Mounts are attached, outermost first, once everything else is
	// read-only: the writable directories and, when dsh is root, the
	// files of $HOME the command may read, read-only and idmapped.
	Mounts []Mount `json:"mounts,omitempty"`
	// Masks are directories only dsh's user may enter (/root) that the
	// command must pass through: each is covered with an empty tmpfs
	// holding only the mount points of the Mounts beneath it and the
	// directories of Reach, read-only once built.
	Masks []string `json:"masks,omitempty"`
	// Reach are directories created, empty, in the Masks so the command
	// can enter them: its working directory and $HOME.
	Reach []string `json:"reach,omitempty"`
	// ReadOnly paths inside writable directories are mounted over
	// read-only; a missing one is skipped (dsh placed a placeholder
	// where it could).
	ReadOnly []string `json:"read_only,omitempty"`
	// Hidden paths are covered, after ReadOnly, by an empty read-only
	// tmpfs (a directory) or /dev/null (a file).
	Hidden []string `json:"hidden,omitempty"`
	// UID and GID are the ids the command runs as inside the user
	// namespace; SetGroups clears its supplementary groups (only a
	// privileged parent lets the namespace do that).
	UID       int  `json:"uid"`
	GID       int  `json:"gid"`
	SetGroups bool `json:"set_groups,omitempty"`
	// MapSelf: the user namespace has no mapping yet; the child maps UID
	// and GID to themselves (and refuses setgroups, as it must to map a
	// group unprivileged) before anything else.
	MapSelf bool `json:"map_self,omitempty"`
	// Dir is the command's working directory, entered once the mounts are
	// in place.
	Dir string `json:"dir,omitempty"`
	// NoUnix refuses the command unix sockets of its own (socket with
	// AF_UNIX), by a seccomp filter: with the network off on a Landlock
	// older than ABI 9, the one way to keep it from connecting to a unix
	// socket made outside (a user's D-Bus or systemd, tmux, an ssh
	// master, docker), which would act for it outside the sandbox.
	NoUnix bool `json:"no_unix,omitempty"`
	// Path and Args are the program to run once inside (Args[0] is its
	// name, as in exec.Cmd); an empty Path makes the child exit 0 once it
	// is inside (dsh's probe).
	Path string   `json:"path"`
	Args []string `json:"args"`
}

// Devices are files every shell writes to (`> /dev/null`); writing them
// escapes nothing.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full"}
