package llm_test

import (
	stdctx "context"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// named answers Stream with its own name as the error, so a test sees which
// provider a request reached.
type named string

func (n named) Stream(stdctx.Context, llm.Request) (llm.Stream, error) {
	return nil, errs.New(errs.InvalidArgument, string(n))
}

// TestProvidersInAgentScopes: a provider plugin in a preset registers in
// its agent's scope, so two agents sharing the preset do not conflict, each
// reaches its own, and a name registered at the root is shadowed there only.
func TestProvidersInAgentScopes(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	svc := llm.NewService()
	if err := svc.Register(root, "m", named("root")); err != nil {
		t.Fatal(err)
	}
	a, _ := root.Scoped("a")
	b, _ := root.Scoped("b")
	c, _ := root.Scoped("c")
	for _, sc := range []*dshctx.Context{a, b} {
		if err := svc.Register(sc, "m", named(sc.Tag())); err != nil {
			t.Fatalf("second agent's provider: %v", err)
		}
	}
	for at, want := range map[*dshctx.Context]string{a: "a", b: "b", c: "root", root: "root"} {
		_, err := svc.In(at).Stream(stdctx.Background(), llm.Request{Provider: "m"})
		if err == nil || err.Error() != "INVALID_ARGUMENT: "+want {
			t.Fatalf("scope %q reached %v, want %s", at.Tag(), err, want)
		}
	}
	a.Dispose(stdctx.Background())
	if _, err := svc.In(a).Stream(stdctx.Background(), llm.Request{Provider: "m"}); err.Error() != "INVALID_ARGUMENT: root" {
		t.Fatalf("after a's scope went: %v", err)
	}
}
