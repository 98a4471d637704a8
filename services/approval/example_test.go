package approval_test

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/hashicorp/go-hclog"
)

// An entry point that serves a person attaches one answerer per agent; it
// shows the call and returns the person's choice. "Allow for this session"
// answers the next call of the same pattern without asking.
func ExampleService_Attach() {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	for _, p := range []dshctx.Plugin{agents.Plugin, approval.Plugin} {
		f, _ := root.Plugin(p, nil)
		f.Await(stdctx.Background())
	}
	svc, _ := approval.Key.Get(root)

	detach, err := svc.Attach("main", func(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
		fmt.Printf("asked: %s wants to run %q\n", req.AgentID, req.Summary)
		return approval.Answer{Choice: approval.AllowSession}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer detach()

	for _, cmd := range []string{"git status", "git diff"} {
		ans, err := svc.Ask(stdctx.Background(), approval.Request{AgentID: "main", Tool: "bash", Summary: cmd, Pattern: "git"})
		fmt.Println(cmd, "->", ans.Choice, err)
	}
	// An agent nobody answers for fails closed.
	_, err = svc.Ask(stdctx.Background(), approval.Request{AgentID: "cron", Tool: "bash", Summary: "git pull"})
	fmt.Println(err != nil)
	// Output:
	// asked: main wants to run "git status"
	// git status -> allow-session <nil>
	// git diff -> allow-session <nil>
	// true
}
