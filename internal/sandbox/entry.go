package sandbox

// marker is the argument that makes a process started from dsh's own
// executable enter the sandbox instead of running dsh.
const marker = "__dsh_sandbox_enter__"

// exitEntryFailed is the child's exit status when it could not enter the
// sandbox; the message itself travels through the report pipe, so the
// status of the program (which may well be 125) is never mistaken for it.
const exitEntryFailed = 125

// entrySpec is what the parent tells the child, as one JSON argument.
type entrySpec struct {
	ABI      int      `json:"abi"`
	Writable []string `json:"writable"`
	Network  bool     `json:"network"`
	// ReportFD is the descriptor of the report pipe in the child.
	ReportFD int `json:"report_fd"`
	// Path and Args are the program to run once inside (Args[0] is its
	// name, as in exec.Cmd).
	Path string   `json:"path"`
	Args []string `json:"args"`
}

// devices are files every shell writes to (`> /dev/null`); writing them
// escapes nothing.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full"}
