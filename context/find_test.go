package context_test

import (
	stdctx "context"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
)

// Find sees what Get sees — the scope's own provider, else the nearest
// around it — and answers false, not an error, when there is none or c has
// ended.
func TestFindIsGetWithoutAnError(t *testing.T) {
	key := dshctx.NewKey[string]("find-test")
	root := dshctx.New()
	defer root.Dispose(stdctx.Background())
	scope, err := root.Scoped("agent")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := key.Find(scope); ok || v != "" {
		t.Fatalf("no provider: %q %v", v, ok)
	}
	if err := key.Provide(root, "root"); err != nil {
		t.Fatal(err)
	}
	if v, ok := key.Find(scope); !ok || v != "root" {
		t.Fatalf("the root's, from the scope: %q %v", v, ok)
	}
	if err := key.Provide(scope, "scope"); err != nil {
		t.Fatal(err)
	}
	if v, ok := key.Find(scope); !ok || v != "scope" {
		t.Fatalf("the scope's own: %q %v", v, ok)
	}
	if v, ok := key.Find(root); !ok || v != "root" {
		t.Fatalf("the root does not see the scope's: %q %v", v, ok)
	}
	if err := scope.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := key.Find(scope); ok {
		t.Fatal("an ended scope finds nothing")
	}
	if _, ok := key.Find(nil); ok {
		t.Fatal("a nil context finds nothing")
	}
}
