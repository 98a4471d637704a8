package archtest

import (
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/sessions"
)

const mod = "github.com/dsh-go/dsh/"

// entryPoints are the package trees that hold sessions, never agents.
var entryPoints = []string{"cmd", "serve", "acp", "cluster"}

// agentPackages are what an entry point must not import.
var agentPackages = []string{mod + "services/agents", mod + "services/agentloop", mod + "services/agentcontroller"}

// allowed lists imports of agent packages an entry point is let off, by
// package. It is empty and stays so: every entry point holds sessions. The
// check keeps reporting an allowance no longer used, so an exception added
// while porting goes with the port.
var allowed = map[string][]string{}

// TestEntryPointsHoldSessionsNotAgents fails when an entry point imports
// an agent package it is not allowed to, or no longer imports one it is.
func TestEntryPointsHoldSessionsNotAgents(t *testing.T) {
	imports := listImports(t)
	for _, must := range []string{mod + "cmd/dsh", mod + "serve", mod + "acp", mod + "cluster", mod + "serve/webhook"} {
		if _, ok := imports[must]; !ok {
			t.Fatalf("go list did not report %s; the check would prove nothing", must)
		}
	}
	if len(allowed) != 0 {
		t.Errorf("the allow-list holds %v; entry points hold sessions, never agents, with no exception: port the package to services/sessions instead", allowed)
	}
	for _, problem := range check(imports, allowed) {
		t.Error(problem)
	}
}

// TestTheCheckRefusesAnEntryPointImportingAnAgentPackage feeds the check
// a package that breaks the rule and one whose allowance went stale.
func TestTheCheckRefusesAnEntryPointImportingAnAgentPackage(t *testing.T) {
	imports := map[string][]string{
		mod + "serve/newthing": {mod + "services/sessions", mod + "services/agents"},
		mod + "acp/legacy":     {mod + "services/sessions", mod + "services/agentloop"},
		mod + "cluster":        {mod + "services/sessions"},
		mod + "plugins/x":      {mod + "services/agents"}, // not an entry point
	}
	// A fixture allow-list, not the real one (which is empty): acp/legacy
	// is let off its import, cluster's allowance went stale.
	allow := map[string][]string{
		mod + "acp/legacy": {mod + "services/agentloop"},
		mod + "cluster":    {mod + "services/agentcontroller"},
	}
	got := check(imports, allow)
	all := strings.Join(got, "\n")
	if len(got) != 2 || !strings.Contains(all, "serve/newthing imports "+mod+"services/agents") ||
		!strings.Contains(all, "cluster no longer imports "+mod+"services/agentcontroller") {
		t.Fatalf("check reported %q; want the forbidden import and the stale allowance", got)
	}
	if strings.Contains(all, "acp/legacy") || strings.Contains(all, "plugins/x") {
		t.Fatalf("check reported %q; an allowed import and a package that is no entry point are no problem", got)
	}
}

// check returns what breaks the rule: forbidden imports of entry points,
// and allowances no longer used.
func check(imports map[string][]string, allow map[string][]string) []string {
	var problems []string
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, pkg := range pkgs {
		if !isEntryPoint(pkg) {
			continue
		}
		for _, dep := range imports[pkg] {
			if slices.Contains(agentPackages, dep) && !slices.Contains(allow[pkg], dep) {
				problems = append(problems, pkg+" imports "+dep+": entry points hold sessions, never agents; use services/sessions (its Service, Source, Mode and codes) instead")
			}
		}
	}
	for pkg, deps := range allow {
		for _, dep := range deps {
			if got, listed := imports[pkg]; listed && !slices.Contains(got, dep) {
				problems = append(problems, pkg+" no longer imports "+dep+": remove it from the allow-list in archtest, which only shrinks")
			}
		}
	}
	return problems
}

func isEntryPoint(pkg string) bool {
	for _, root := range entryPoints {
		if pkg == mod+root || strings.HasPrefix(pkg, mod+root+"/") {
			return true
		}
	}
	return false
}

// listImports runs go list over the entry points: the non-test imports of
// each package.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("this test runs go list and needs the go command on PATH: %v", err)
	}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Imports " "}}`}
	for _, root := range entryPoints {
		args = append(args, mod+root+"/...")
	}
	out, err := exec.Command(gobin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	return imports
}

// handsOut are the packages whose values are an agent or its scope: what
// the session layer must not hand out.
var handsOut = []string{mod + "services/agents", mod + "services/agentloop", mod + "context"}

// TestTheSessionLayerHandsOutNoAgent fails when an exported method of the
// session layer's types returns an agent, an agent loop value or a scope:
// Session.Agent() went, and a way back to the agent must not return under
// another name. A test that must look into an agent takes it from the
// agents registry by Session.AgentID().
func TestTheSessionLayerHandsOutNoAgent(t *testing.T) {
	types := []reflect.Type{
		reflect.TypeFor[*sessions.Session](),
		reflect.TypeFor[*sessions.Controller](),
		reflect.TypeFor[*sessions.Attachment](),
		reflect.TypeFor[sessions.Service](),
		reflect.TypeFor[sessions.Stream](),
		reflect.TypeFor[sessions.Turn](),
	}
	for _, typ := range types {
		for _, problem := range leaks(typ) {
			t.Error(problem)
		}
	}
}

// TestTheLeakCheckFindsAnAgentBehindAPointerOrSlice feeds leaks a type with
// a method that hands out agents and one that does not.
func TestTheLeakCheckFindsAnAgentBehindAPointerOrSlice(t *testing.T) {
	got := leaks(reflect.TypeFor[*leaky]())
	if len(got) != 2 || !strings.Contains(got[0], "Agents returns []agents.Agent") ||
		!strings.Contains(got[1], "Handle returns *agents.Handle") {
		t.Fatalf("leaks reported %q; want Agents and Handle, not ID", got)
	}
}

type leaky struct{}

func (*leaky) Agents() ([]agents.Agent, error) { return nil, nil }
func (*leaky) Handle() *agents.Handle          { return nil }
func (*leaky) ID() string                      { return "" }

// leaks returns the exported methods of typ with a result from a package
// of handsOut, looking through pointers, slices, arrays, maps and channels.
func leaks(typ reflect.Type) []string {
	var out []string
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		ft := m.Type
		for j := range ft.NumOut() {
			r := ft.Out(j)
			if pkg, bad := fromHandsOut(r); bad {
				out = append(out, fmt.Sprintf("%s.%s returns %s (package %s): the session layer hands out no agent or scope; offer what entry points need on the Service instead", typ, m.Name, r, pkg))
			}
		}
	}
	return out
}

func fromHandsOut(t reflect.Type) (string, bool) {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			t = t.Elem()
			continue
		case reflect.Map:
			if pkg, bad := fromHandsOut(t.Key()); bad {
				return pkg, true
			}
			t = t.Elem()
			continue
		}
		return t.PkgPath(), slices.Contains(handsOut, t.PkgPath())
	}
}
