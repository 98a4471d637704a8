// Package checkpoints is the session.checkpoints plugin: before a
// mutating tool call runs, it records the workspace state the call can
// change, and it rewinds a session's workspace to any of those states
// (and redoes the rewind).
//
// # What a checkpoint holds
//
// A call of a tool that is not parallel-safe (parallel-safe tools only
// read: read, list, glob, grep, read-only MCP tools) gets a checkpoint.
// The file tools write and edit can change only the path they name, so
// their checkpoint is that path's state: its content, or its absence.
// Anything else — bash above all — can change the whole workspace (bash's
// writes are confined to it by the sandbox), so its checkpoint is a
// snapshot of the workspace: every file, directory and symlink, tracked,
// untracked and git-ignored alike, but for .git, the exclude globs and
// what is over the size bounds. Each checkpoint records the state before
// the call and the state it left, so a rewind can tell whether the
// workspace changed underneath since.
//
// # How it is stored
//
// Contents are stored once, by sha256, in the attachments store the
// session's messages use (so the folder store keeps them beside the
// session files, and hosts that share sessions in JetStream share them in
// its object store): new contents are packed into blobs of up to 8 MiB, a
// manifest (JSON) says per path where its bytes are, and the checkpoint
// event in the session log names the manifest and the packs. A snapshot
// reads only the files whose size, mtime or inode changed since the last
// one it took for the session (the index), and stores only contents no
// earlier checkpoint stored. Copy-on-write (reflink, overlayfs) is not
// used: it would need one file system for the workspace and the store and
// would not carry to another host; content addressing does both.
//
// # Rewind
//
// The plugin answers session/rewind for its agents: the target state of a
// path is the before-state of the first checkpoint at or after the point
// that says anything about it (a workspace snapshot says something about
// every path it does not exclude). What is current is compared with what
// the last checkpoint left (its after-state); a path that differs was
// changed underneath, and the rewind is refused with
// REWIND_WORKSPACE_CHANGED unless forced. The rewind records the state it
// replaced, so a redo can put it back.
package checkpoints

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// Codes of the plugin (a changed workspace is sessions.WorkspaceChanged).
const (
	// Damaged: a checkpoint's stored bytes are missing or do not match
	// their digest.
	Damaged errs.Code = "REWIND_CHECKPOINT_DAMAGED"
)

// Config bounds what a checkpoint costs.
type Config struct {
	// MaxFileBytes leaves larger files out of a checkpoint (default 8 MiB).
	MaxFileBytes int64 `koanf:"max_file_bytes" json:"max_file_bytes,omitempty"`
	// MaxTotalBytes is the most bytes of files one checkpoint covers
	// (default 512 MiB); files past it are left out.
	MaxTotalBytes int64 `koanf:"max_total_bytes" json:"max_total_bytes,omitempty"`
	// Exclude are globs (path.Match) of paths a workspace snapshot leaves
	// out: a glob without '/' matches any file or directory of that name
	// ("node_modules", "*.log"), one with '/' the path from the
	// workspace root ("build/out"). .git is always left out.
	Exclude []string `koanf:"exclude" json:"exclude,omitempty"`
	// PackBytes is the size of the blobs new contents are packed into.
	PackBytes int `koanf:"-" json:"-"`
}

// Defaults fill in the bounds.
const (
	DefaultMaxFileBytes  = 8 << 20
	DefaultMaxTotalBytes = 512 << 20
	defaultPackBytes     = 8 << 20
)

func (c Config) withDefaults() Config {
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if c.PackBytes <= 0 {
		c.PackBytes = defaultPackBytes
	}
	return c
}

// Validate checks the exclude globs.
func (c Config) Validate() error {
	for i, g := range c.Exclude {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return errs.New(errs.InvalidArgument, fmt.Sprintf(
				"session.checkpoints: exclude[%d] %q is not a glob path.Match accepts; write e.g. node_modules, *.log or build/out", i, g))
		}
	}
	return nil
}

// matches reports whether rel matches an exclude glob.
func (c Config) matches(rel string) bool {
	base := path.Base(rel)
	for _, g := range c.Exclude {
		if strings.Contains(g, "/") {
			if ok, _ := path.Match(strings.TrimSuffix(g, "/"), rel); ok {
				return true
			}
			continue
		}
		if ok, _ := path.Match(g, base); ok {
			return true
		}
	}
	return false
}

// Plugin records checkpoints for the agents in its scope and rewinds them.
var Plugin = plugin.Register("session.checkpoints", "records the workspace before each mutating tool call (bash included), for /rewind and /redo", func(ctx *dshctx.Context, cfg Config) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	p := &checkpointer{cfg: cfg.withDefaults(), agents: reg, states: map[string]*agentState{}}
	if _, err := tools.EventExecute.On(ctx, p.execute); err != nil {
		return err
	}
	if _, err := sessions.EventRewind.On(ctx, p.rewind); err != nil {
		return err
	}
	_, err = agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error {
		p.mu.Lock()
		delete(p.states, a.ID())
		p.mu.Unlock()
		return nil
	})
	return err
}, agents.Key)

type checkpointer struct {
	cfg    Config
	agents *agents.Registry

	mu     sync.Mutex
	states map[string]*agentState
}

// agentState is one agent's taker; mu makes its checkpoints and rewinds
// take turns.
type agentState struct {
	mu sync.Mutex
	t  *taker
}

// workspaced is what an agent with a workspace offers (the agent loop's).
type workspaced interface{ Workspace() string }

// state returns the agent's state, its taker set for ws and the session.
func (p *checkpointer) state(a agents.Agent, ws string) (*agentState, error) {
	store, err := attachments.Key.Get(a.Context())
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	st := p.states[a.ID()]
	if st == nil {
		st = &agentState{}
		p.states[a.ID()] = st
	}
	p.mu.Unlock()
	st.mu.Lock()
	sid := a.Session().ID()
	if st.t == nil || st.t.ws != ws {
		st.t = &taker{ws: ws, cfg: p.cfg, idx: map[string]indexed{}, locs: map[string]loc{}}
	}
	st.t.put = func(b []byte) (string, error) {
		// The session's log keeps the reference: the release is never
		// called, as for a message's parts.
		ref, _, err := store.Put(sid, b)
		return ref, err
	}
	return st, nil
}

// execute takes a checkpoint around a call that may write: one whose
// tool is neither read-only (tools.IsReadOnly, what plan mode trusts too:
// a bash line of reading programs takes no snapshot) nor parallel-safe.
func (p *checkpointer) execute(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
	if x.Tool == nil || x.Tool.ParallelSafe || x.Call.Workspace == "" {
		return next.Call(ctx, x)
	}
	if ro, _ := tools.IsReadOnly(x.Tool, x.Call); ro {
		return next.Call(ctx, x)
	}
	agentID := x.Call.AgentID
	a, ok := p.agents.Get(agentID)
	if !ok {
		return next.Call(ctx, x)
	}
	st, err := p.state(a, x.Call.Workspace)
	if err != nil {
		return next.Call(ctx, x)
	}
	defer st.mu.Unlock()
	t := st.t
	rels, scope := p.scope(t, x)
	take := func(pk *pack, ex *exclusions) (state, error) {
		if scope == "workspace" {
			return t.walk(pk, ex)
		}
		return t.paths(pk, ex, rels)
	}
	began := time.Now()
	var ex exclusions
	pk := &pack{t: t}
	before, err := take(pk, &ex)
	if err == nil {
		// The state before is stored before the call may change it.
		err = pk.flush()
	}
	if err != nil {
		// No checkpoint is no reason to keep the work from running; the
		// missing record tells a rewind it cannot go back past here.
		return next.Call(ctx, x)
	}
	took := time.Since(began)
	res, cerr := next.Call(ctx, x)
	began = time.Now()
	after, aerr := take(pk, &ex)
	if aerr == nil {
		aerr = pk.flush()
	}
	t.resolve(&before)
	t.resolve(&after)
	cp := session.Checkpoint{CallID: x.Call.ID, Tool: x.Call.Name, Workspace: t.ws, Scope: scope, Paths: rels,
		Excluded: ex.list, ExcludedMore: ex.more, Stored: pk.stored}
	if aerr != nil || cerr != nil {
		cp.Incomplete = true
		after = state{}
	}
	for _, e := range before.Entries {
		if e.Kind == kindFile {
			cp.Files++
			cp.Bytes += e.Size
		}
	}
	data, err := manifest{Before: before, After: after}.encode()
	if err == nil {
		cp.Manifest, err = t.put(data)
	}
	if err != nil {
		return res, cerr
	}
	cp.Blobs = usedBlobs(before, after)
	cp.Took = took + time.Since(began)
	// The agent's driver appends it (session/record) with the call's
	// turn and step, before the call's result: the driver waits for the
	// call to return before it records the result.
	session.EventRecord.Emit(ctx, a.Context(), session.Record{AgentID: agentID,
		Event: session.Event{Type: session.Checkpointed, Checkpoint: &cp}})
	return res, cerr
}

// scope says what a call can change: the paths the file tools name, or
// the whole workspace.
func (p *checkpointer) scope(t *taker, x tools.Execution) ([]string, string) {
	switch x.Call.Name {
	case "write", "edit":
		var args struct {
			Path string `json:"path"`
		}
		if json.Unmarshal(x.Call.Arguments, &args) == nil && args.Path != "" {
			if rel, ok := t.rel(args.Path); ok {
				return append([]string{rel}, t.missingParents(rel)...), "paths"
			}
			// Outside the workspace the tool refuses it; nothing to keep.
			return nil, "paths"
		}
	}
	return nil, "workspace"
}
