package execplugin

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/tools"
	"google.golang.org/protobuf/proto"
)

// toolName is what providers accept as a tool's name; a plugin's tool is
// refused at its start rather than by the model's provider mid-turn.
var toolName = lazyregexp.New(`^[a-zA-Z0-9_-]{1,64}$`)

// approvals are the values ToolDecl.approval may take.
var approvals = map[string]tools.Decision{"": "", "allow": tools.Allow, "ask": tools.Ask, "deny": tools.Deny}

// checkTools refuses a declaration the host cannot register, before any of
// its tools is: a bad name, a name declared twice, an unknown approval.
func (r *remote) checkTools(decls []*pluginv1.ToolDecl) error {
	seen := map[string]bool{}
	for _, d := range decls {
		name := d.GetName()
		switch {
		case !toolName.MatchString(name):
			return r.protocolError("it declares a tool named %q; a tool's name must match ^[a-zA-Z0-9_-]{1,64}$ (letters, digits, _ and -, at most 64), as model providers require", name)
		case seen[name]:
			return r.protocolError("it declares the tool %q twice; each tool needs a name of its own", name)
		}
		seen[name] = true
		if _, ok := approvals[d.GetApproval()]; !ok {
			return r.protocolError("its tool %q declares approval %q; accepted: allow (or empty), ask, deny", name, d.GetApproval())
		}
		if p := strings.TrimSpace(d.GetParameters()); p != "" && !json.Valid([]byte(p)) {
			return r.protocolError("the parameters of its tool %q are not JSON text; send the JSON Schema of the arguments as a string, or leave it empty for a tool without arguments", name)
		}
	}
	return nil
}

// registerTools registers the plugin's tools in ctx's scope through the
// tools service: the root's, or the preset's agent. ctx's fiber owns each
// registration, so disposing the entry removes them. Calls reach the
// plugin after the pipeline validated, approved and scheduled them.
func (r *remote) registerTools(ctx *dshctx.Context, decls []*pluginv1.ToolDecl) error {
	if len(decls) == 0 {
		return nil
	}
	if err := r.checkTools(decls); err != nil {
		return err
	}
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return errs.Wrap(PluginStartFailed, err, fmt.Sprintf("plugin %q (%s) declares tools, and the tools service is not loaded", r.entry.ID, r.entry.Exec))
	}
	for _, d := range decls {
		t := tools.Tool{
			Name: d.GetName(), Description: d.GetDescription(), ParallelSafe: d.GetParallelSafe(),
			Approval: approvals[d.GetApproval()],
			Execute:  r.executeTool,
		}
		if p := strings.TrimSpace(d.GetParameters()); p != "" {
			t.Parameters = json.RawMessage(p)
		}
		if err := svc.Register(ctx, t); err != nil {
			if errs.HasCode(err, errs.ServiceConflict) {
				return errs.Wrap(PluginStartFailed, err, fmt.Sprintf(
					"plugin %q (%s) declares the tool %q, and a tool of that name is already registered in this scope; remove one of the two entries, or mount them in different presets",
					r.entry.ID, r.entry.Exec, d.GetName()))
			}
			return errs.Wrap(PluginProtocol, err, fmt.Sprintf("plugin %q (%s) declares the tool %q, which cannot be registered", r.entry.ID, r.entry.Exec, d.GetName()))
		}
	}
	return nil
}

// redeclared compares the tools a restarted plugin declares with those of
// its first start. The first declaration stays: the model may already
// have been told about those tools, their schemas are what calls are
// validated against, and the registration belongs to the entry's fiber,
// not to one process. A difference is worth a warning, since calls of a
// tool the new process dropped now fail in the plugin.
func (r *remote) redeclared(decls []*pluginv1.ToolDecl) {
	r.mu.Lock()
	first := r.toolDecls
	r.mu.Unlock()
	diff := toolDiff(first, decls)
	if diff == "" {
		return
	}
	r.log.Warn(fmt.Sprintf("plugin %q (%s) declared different tools after its restart (%s); dsh keeps the tools of its first start until the entry is reloaded",
		r.entry.ID, r.entry.Exec, diff))
}

// toolDiff names the tools added, removed and changed from a to b; "" when
// they declare the same.
func toolDiff(a, b []*pluginv1.ToolDecl) string {
	byName := func(ds []*pluginv1.ToolDecl) map[string]*pluginv1.ToolDecl {
		m := map[string]*pluginv1.ToolDecl{}
		for _, d := range ds {
			m[d.GetName()] = d
		}
		return m
	}
	before, after := byName(a), byName(b)
	var added, removed, changed []string
	for n, d := range after {
		if old, ok := before[n]; !ok {
			added = append(added, n)
		} else if !proto.Equal(old, d) {
			changed = append(changed, n)
		}
	}
	for n := range before {
		if _, ok := after[n]; !ok {
			removed = append(removed, n)
		}
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"added", added}, {"removed", removed}, {"changed", changed}} {
		if len(p.names) > 0 {
			slices.Sort(p.names)
			parts = append(parts, p.what+" "+strings.Join(p.names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
