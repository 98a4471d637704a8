package agentcontroller_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestOnlyTheControllerInsertsOutsideMessages fails when code outside the
// controller and the agent runtime calls an agent's Followup or Steer:
// every message from outside must pass admission. Calls are recognized by
// receiver type, so the session controller's own Session.Steer (which
// delivers through admission) is not mistaken for one. Tests are exempt
// (they drive agents directly on purpose).
func TestOnlyTheControllerInsertsOutsideMessages(t *testing.T) {
	offenders := callsOutside(t, map[string]bool{
		mod + "services/agentcontroller": true, // the one entry point
		mod + "services/agentloop":       true, // the agent itself
		// A Stop hook's feedback is made inside the turn, at
		// agent/turn-continuation, for the step it continues: the
		// agent's own machinery, not a message from outside.
		mod + "plugins/hooks": true,
		// The persistence backends' conformance suite: test code in a
		// package of its own, so every backend's tests can run it.
		mod + "services/session/backendtest": true,
	}, map[string]bool{
		"services/agents.Agent.Followup":             true,
		"services/agents.Agent.Steer":                true,
		"services/agentloop.ReactLoopAgent.Followup": true,
		"services/agentloop.ReactLoopAgent.Steer":    true,
	})
	if len(offenders) > 0 {
		t.Fatalf("these calls put outside messages into an inbox without admission; deliver through agentController.Deliver instead:\n%s",
			strings.Join(offenders, "\n"))
	}
}

// TestOnlyTheSessionControllerOwnsAgents fails when code outside the
// session controller, the agent runtime and the agent controller creates or
// resumes agents through the factory, delivers, or disposes an agent's
// handle: entry points go through services/sessions (issue 20). It type
// checks the repository's packages against their dependencies' export data,
// so it recognizes the methods by receiver type, not by name.
func TestOnlyTheSessionControllerOwnsAgents(t *testing.T) {
	allowed := map[string]bool{
		mod + "services/agents":          true, // the factory seam itself
		mod + "services/agentcontroller": true, // Deliver itself
		mod + "services/agentloop":       true, // the factory
		mod + "services/sessions":        true, // the session controller
		// The host is the agents factory's one operation with presets
		// (OpenAgent) and starts the config's agents; the CLI runs on
		// the session controller (issue 20).
		mod + "host": true,
		// The persistence backends' conformance suite: test code in a
		// package of its own, so every backend's tests can run it.
		mod + "services/session/backendtest": true,
	}
	forbidden := map[string]bool{
		"services/agents.Registry.Create":             true,
		"services/agents.Registry.Resume":             true,
		"services/agents.Factory.Create":              true,
		"services/agents.Factory.Resume":              true,
		"services/agents.Handle.Dispose":              true,
		"services/agentcontroller.Controller.Deliver": true,
	}
	offenders := callsOutside(t, allowed, forbidden)
	if len(offenders) > 0 {
		t.Fatalf("these calls create, resume, deliver to or dispose agents outside the session controller; open a session through services/sessions instead:\n%s",
			strings.Join(offenders, "\n"))
	}
}

const mod = "github.com/dsh-go/dsh/"

// callsOutside type checks the repository's packages outside allowed
// against their dependencies' export data and returns the places that
// call a method in forbidden ("services/agents.Registry.Create"): by
// receiver type, not by name.
func callsOutside(t *testing.T, allowed, forbidden map[string]bool) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		Standard                bool
	}
	exports := map[string]string{}
	var ours []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if strings.HasPrefix(p.ImportPath, mod) && !allowed[p.ImportPath] {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(exports[path])
	})
	var offenders []string
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type checking %s: %v", p.ImportPath, err)
		}
		for sel, s := range info.Selections {
			fn, ok := s.Obj().(*types.Func)
			if !ok || fn.Pkg() == nil {
				continue
			}
			recv := types.Unalias(s.Recv())
			if ptr, ok := recv.(*types.Pointer); ok {
				recv = ptr.Elem()
			}
			named, ok := recv.(*types.Named)
			if !ok {
				continue
			}
			name := strings.TrimPrefix(fn.Pkg().Path(), mod) + "." + named.Obj().Name() + "." + fn.Name()
			if forbidden[name] {
				offenders = append(offenders, fset.Position(sel.Pos()).String()+": "+name)
			}
		}
	}
	sort.Strings(offenders)
	return offenders
}
