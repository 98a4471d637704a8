package sessions

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
)

// Spec is one agent to create or resume, with what goes into its scope.
type Spec struct {
	// AgentID is the id the agent registers under; unique among live
	// agents.
	AgentID string
	// Agent is the configured agent id or template the session is of; the
	// opener looks its settings and presets up by it.
	Agent string
	// Presets are mounted in the agent's scope, in order, after the
	// configured agent's own.
	Presets []string
	// SessionID is the session to create, or to resume.
	SessionID string
	// Options are the agent's settings: Workspace and the provider/model
	// overrides are already folded in.
	Options agents.Options
	// Entries are plugins mounted in the agent's scope after its presets.
	Entries []Entry
}

// Entry is an in-process plugin to mount in one session's agent: its id
// (Use) and its config, as a config file's use: entry would give them.
type Entry struct {
	Use    string
	Config map[string]any
}

// Opener creates an agent with its presets and workspace as one operation.
// The host implements it (it mounts presets; services must not import the
// host); RegistryOpener serves callers without a host. Both methods return
// a handle only when everything succeeded: a failure leaves nothing behind.
type Opener interface {
	Open(ctx stdctx.Context, spec Spec) (*agents.Handle, error)
	Resume(ctx stdctx.Context, spec Spec) (*agents.Handle, error)
}

// RegistryOpener opens agents straight through the agents registry: for
// embedders and tests that run without a host. It knows no configured
// agents: Spec.Options is used as given.
type RegistryOpener struct {
	Registry *agents.Registry
	// Setup runs in the agent's scope before it is published (see
	// agents.CreateOptions.Setup); nil applies nothing, and then a spec
	// naming presets is refused, since nothing could mount them.
	Setup func(scope *dshctx.Context, spec Spec) error
}

var _ Opener = RegistryOpener{}

// Open creates the agent in a new session.
func (o RegistryOpener) Open(ctx stdctx.Context, spec Spec) (*agents.Handle, error) {
	setup, err := o.setup(spec)
	if err != nil {
		return nil, err
	}
	return o.Registry.Create(ctx, agents.CreateOptions{AgentID: spec.AgentID, SessionID: spec.SessionID, Options: spec.Options, Setup: setup})
}

// Resume creates the agent continuing a persisted session.
func (o RegistryOpener) Resume(ctx stdctx.Context, spec Spec) (*agents.Handle, error) {
	setup, err := o.setup(spec)
	if err != nil {
		return nil, err
	}
	return o.Registry.Resume(ctx, agents.ResumeOptions{AgentID: spec.AgentID, ResumeSessionID: spec.SessionID, Options: spec.Options, Setup: setup})
}

func (o RegistryOpener) setup(spec Spec) (func(*dshctx.Context) error, error) {
	if o.Registry == nil {
		return nil, errs.New(errs.InvalidArgument, "sessions.RegistryOpener: Registry is nil; set it to the agents service")
	}
	if o.Setup == nil {
		if len(spec.Entries) > 0 {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
				"session %q asks for %d plugin entries, but this session controller opens agents without a host and cannot mount them; drop them or give the controller the host's opener", spec.SessionID, len(spec.Entries)))
		}
		if len(spec.Presets) > 0 {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
				"session %q asks for presets %v, but this session controller opens agents without a host and cannot mount presets; drop them or give the controller the host's opener", spec.SessionID, spec.Presets))
		}
		return nil, nil
	}
	return func(scope *dshctx.Context) error { return o.Setup(scope, spec) }, nil
}
