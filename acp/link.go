package acp

import (
	stdctx "context"
	"fmt"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/editor"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// The editor's side of a session has to run in the session's agent: the
// approval mode is a policy on tools/approve, and the editor's files are
// lent to the file tools on tools/execute. The server holds sessions, not
// agents, so it puts that side there the way every per-session plugin
// gets there: as an entry of the session (sessions.OpenOptions.Entries),
// the plugin acp.session. Its config is plain data, a link naming live
// state the server keeps in this process — the mode the editor can switch
// and the connection whose files it lends.

// sessionPlugin is the id of the plugin the server mounts in each of its
// sessions' agents.
const sessionPlugin = "acp.session"

// ReasonNoLink goes with INVALID_ARGUMENT when acp.session is mounted with
// a link no ACP connection of this process made: in a config file, or on
// another process than the server's.
const ReasonNoLink = "acp/no-link"

// linkConfig is acp.session's config.
type linkConfig struct {
	// Link names the server's state for the session (links).
	Link string `koanf:"link" json:"link"`
}

// Validate refuses an entry without a link: the plugin has nothing to do
// without the server, so a config file naming it is a mistake.
func (c linkConfig) Validate() error {
	if c.Link == "" {
		return errs.New(errs.InvalidArgument, "acp.session has no link: dsh acp mounts it in each editor session's agent by itself; remove it from the config").WithReason(ReasonNoLink)
	}
	return nil
}

var _ = plugin.Register(sessionPlugin, "the editor's side of a dsh acp session (its approval mode and the editor's files); dsh acp mounts it itself",
	func(ctx *dshctx.Context, c linkConfig) error { return mountLink(ctx, c.Link) })

// links holds the state of the sessions the server opens, by link.
var links sync.Map // string → *link

// link is what acp.session reads of one of the server's sessions: the
// mode, fixed before the open, and the conv, once it exists.
type link struct {
	mode *modePolicy
	conv atomic.Pointer[conv]
}

// newLink registers a link for a session about to open in mode and
// returns its entry; release forgets it once the session has closed.
func newLink(key, mode string) (*link, sessions.Entry, func()) {
	l := &link{mode: newModePolicy(mode)}
	links.Store(key, l)
	return l, sessions.Entry{Use: sessionPlugin, Config: map[string]any{"link": key}}, func() { links.Delete(key) }
}

// mountLink puts the linked session's mode policy and file lending in
// scope, the agent's; both go with it.
func mountLink(ctx *dshctx.Context, key string) error {
	v, ok := links.Load(key)
	if !ok {
		return errs.New(errs.InvalidArgument, fmt.Sprintf(
			"acp.session: link %q names no editor session of this process; only dsh acp mounts this plugin, in the sessions it opens", key)).WithReason(ReasonNoLink)
	}
	l := v.(*link)
	// Prepended: the mode asks the agent's other policies first and
	// tightens or loosens what they answer.
	if _, err := tools.EventApprove.On(ctx, l.mode.approve, waterfall.Prepend); err != nil {
		return err
	}
	_, err := tools.EventExecute.On(ctx, func(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
		if st := l.conv.Load(); st != nil {
			if files := st.filesOf(); files != nil {
				ctx = editor.With(ctx, files)
			}
		}
		return next.Call(ctx, x)
	})
	return err
}
