package files

import (
	stdctx "context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/tools/internal/workspace"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/tools"
)

// Writes to protected paths (package protect) are a question for a person
// whatever the approval policy said about the tool: a mode that allows
// write in the workspace did so for source files, not for .git/config or
// a hooks file that dsh will run unsandboxed next time. The tool asks the
// approval service itself, at the last moment, once it knows which file
// the path lands on; with nobody to ask the write fails closed.

// Codes of the protection refusals.
const (
	// ProtectedPath: a write to a protected path was not approved.
	ProtectedPath errs.Code = "PATH_PROTECTED"
	// SecretPath: a read of a path the protected list marks secret
	// (serve's token, a session store).
	SecretPath errs.Code = "PATH_SECRET"
)

// Values of Config.ProtectedWrites.
const (
	ProtectedAsk   = "ask"
	ProtectedAllow = "allow"
)

// guard holds what the protection check needs from the tree.
type guard struct {
	list      *protect.List
	approvals *approval.Service
}

// protectedEntry reports the entry protecting rel: by the name given (after
// cleaning, so ./.git//config and sub/../.git/config count) or by the file
// it lands on once symlinks are followed.
func (c Config) protectedEntry(p *place, rel string) (e protect.Entry, shown string, hit bool) {
	list := c.guard.list
	if list == nil {
		list = defaultList
	}
	if e, ok := list.Match(p.dir, p.abs(rel)); ok {
		return e, rel, true
	}
	real, ok := p.realPath(rel)
	if !ok {
		return protect.Entry{}, "", false
	}
	if e, ok := list.Match(p.realDir(), real); ok {
		// Name both: the model wrote one name, the file has another.
		if r, err := filepath.Rel(p.realDir(), real); err == nil {
			real = filepath.ToSlash(r)
		}
		return e, rel + " (which leads to " + workspace.Cut(real) + ")", true
	}
	return protect.Entry{}, "", false
}

// secret reports the secret entry rel is: by the name given, by the file
// it leads to once symlinks are followed, and, when f is open on it, by
// the file f is (a symlink swapped in after the first look). The bash
// sandbox shows a secret empty to a command; the file tools would
// otherwise read it to the model all the same (serve's token, the
// sessions of everyone using the store).
func (c Config) secret(p *place, rel string, f *os.File) (protect.Entry, bool) {
	list := c.guard.list
	if list == nil {
		list = defaultList
	}
	if e, ok := list.Match(p.dir, p.abs(rel)); ok && e.Secret {
		return e, true
	}
	var real string
	ok := false
	if f != nil {
		r, err := fdPath(f)
		real, ok = r, err == nil
	} else {
		real, ok = p.realPath(rel)
	}
	if ok {
		if e, hit := list.Match(p.realDir(), real); hit && e.Secret {
			return e, true
		}
	}
	return protect.Entry{}, false
}

// secretByName is secret for a walk: by name only, cheap per entry. A
// walk enters no symlink, and what it opens (grep) is checked again.
func (c Config) secretByName(p *place) func(rel string) bool {
	list := c.guard.list
	if list == nil {
		list = defaultList
	}
	return func(rel string) bool {
		e, ok := list.Match(p.dir, p.abs(rel))
		return ok && e.Secret
	}
}

func secretErr(arg string, e protect.Entry) error {
	return errs.New(SecretPath, fmt.Sprintf("%s is %s, which dsh keeps from the model: the file tools do not read it and a bash command sees it empty", workspace.Quote(arg), e.What))
}

// defaultList serves a config built without the plugin (tests, embedders
// calling build directly): the defaults still hold.
var defaultList = protect.New()

// allowWrite decides whether the call may write rel. It returns ok, or the
// error result to give the model. approved lists the entries a person
// allowed, for the check writeFile repeats on the opened file.
func (c Config) allowWrite(ctx stdctx.Context, call tools.Call, p *place, rel, arg string) (approved []string, r tools.Result, ok bool) {
	if c.ProtectedWrites == ProtectedAllow {
		return nil, tools.Result{}, true
	}
	e, shown, hit := c.protectedEntry(p, rel)
	if !hit {
		return nil, tools.Result{}, true
	}
	if err := c.askProtected(ctx, call, shown, e); err != nil {
		r, _ := fail(err)
		return nil, r, false
	}
	return []string{e.Path}, tools.Result{}, true
}

// askProtected asks the agent's person about writing rel, protected by e;
// nil means approved.
func (c Config) askProtected(ctx stdctx.Context, call tools.Call, rel string, e protect.Entry) error {
	what := fmt.Sprintf("%s is %s", quoteCode(rel), e.What)
	refuse := func(why string) error {
		return errs.New(ProtectedPath, fmt.Sprintf("%s was not written: %s. It is a protected path, written only with a person's approval, and %s. "+
			"Leave it unchanged, or tell the user what change it needs so they can make it.", quoteCode(rel), what, why)).WithReason("protect/not-approved")
	}
	if call.Unattended {
		return refuse("this turn came from an unattended source, which never waits for a person")
	}
	if c.guard.approvals == nil {
		return refuse("no approval service is there to ask a person")
	}
	if call.AgentID == "" {
		return refuse("the call names no agent whose person could be asked")
	}
	ans, err := c.guard.approvals.Ask(ctx, approval.Request{
		AgentID: call.AgentID, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
		Summary: fmt.Sprintf("%s %s (protected)", call.Name, rel),
		Reason:  what + ": a change to it is not confined by the workspace",
		// "Allow for this session" covers this protected entry only.
		Pattern: "protected:" + e.Path,
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errs.HasCode(err, approval.NoAnswerer):
		return refuse("nobody is attached to approve it")
	case err != nil:
		return refuse(fmt.Sprintf("asking for approval failed (%v)", err))
	case !ans.Allowed():
		why := "the approval was refused"
		if ans.Reason != "" {
			why += ": " + ans.Reason
		}
		return refuse(why)
	}
	return nil
}

// quoteCode renders a path the way the question shows it.
func quoteCode(rel string) string { return "`" + workspace.Cut(rel) + "`" }

// realPath resolves rel through symlinks, inside the root: the file itself
// when it exists, else its nearest existing folder followed by the rest of
// the name. The kernel names what the opened descriptor is, so the result
// is the file the write would land on at this moment.
func (p *place) realPath(rel string) (string, bool) {
	rest := ""
	for cur, hops := rel, 0; hops < maxHops; hops++ {
		f, err := p.resolve(cur)
		if err == nil {
			real, rerr := fdPath(f)
			f.Close()
			if rerr != nil {
				return "", false
			}
			return filepath.Join(real, filepath.FromSlash(rest)), true
		}
		var link string
		switch {
		case errors.Is(err, errSymlink):
			// A link whose target cannot be opened for reading: follow
			// its text by hand, inside the root.
			if link, err = p.root.Readlink(cur); err != nil || path.IsAbs(link) {
				return "", false
			}
			cur = path.Join(path.Dir(cur), link)
		case errors.Is(err, fs.ErrNotExist) && cur != ".":
			rest = path.Join(path.Base(cur), rest)
			cur = path.Dir(cur)
		default:
			return "", false
		}
	}
	return "", false
}

// maxHops bounds the links realPath follows by hand, as the kernel does.
const maxHops = 40

// errSymlink: the name is a symlink whose target could not be opened.
var errSymlink = errors.New("a symlink whose target cannot be opened")

// resolve opens cur so that its descriptor names the file: for reading
// when that is allowed (following a last symlink), else with O_PATH, which
// needs no permission on the file — as an ordinary user a file may be
// writable but not readable. O_PATH does not follow a last symlink, so a
// symlink found that way is errSymlink for the caller to follow.
func (p *place) resolve(cur string) (*os.File, error) {
	f, err := p.root.OpenFile(cur, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return f, err
	}
	f, err = p.root.OpenFile(cur, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if st, serr := p.root.Lstat(cur); serr == nil && st.Mode()&fs.ModeSymlink != 0 {
		f.Close()
		return nil, errSymlink
	}
	return f, nil
}

// realDir is the workspace with its symlinks resolved, the frame realPath's
// answers are in.
func (p *place) realDir() string {
	if real, err := filepath.EvalSymlinks(p.dir); err == nil {
		return real
	}
	return p.dir
}

// fdPath names the file f is open on, as the kernel sees it.
func fdPath(f *os.File) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}

// recheck runs on the file a write opened: should a symlink have been
// swapped in after allowWrite looked, the file now open may be protected
// though the name was not. It refuses what no person approved.
func (c Config) recheck(p *place, f *os.File, approved []string) error {
	if c.ProtectedWrites == ProtectedAllow {
		return nil
	}
	real, err := fdPath(f)
	if err != nil {
		return nil // no /proc: the check before the open stands alone
	}
	list := c.guard.list
	if list == nil {
		list = defaultList
	}
	e, hit := list.Match(p.realDir(), real)
	if !hit {
		return nil
	}
	for _, a := range approved {
		if a == e.Path {
			return nil
		}
	}
	return fmt.Errorf("now leads to a protected file (%s is %s) that was not approved for this write; it changed while the write was prepared", real, e.What)
}

// rechecker is the check writeFile runs on the opened file.
func (c Config) rechecker(p *place, approved []string) func(*os.File) error {
	return func(f *os.File) error { return c.recheck(p, f, approved) }
}
