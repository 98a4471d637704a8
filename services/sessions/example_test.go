package sessions_test

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/hashicorp/go-hclog"
)

// An entry point holds a Service, never an agent: it ensures a session,
// prompts it, follows its stream and waits for the turn of its prompt.
// The same calls work when the session runs on another host.
func ExampleService() {
	ctx := stdctx.Background()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(ctx)
	// What the host mounts: the core services, a model, the loop, the
	// agent controller and the session controller with live hubs.
	_ = core.Mount(root)
	for _, p := range []struct {
		plugin dshctx.Plugin
		config any
	}{
		{scripted.Plugin, scripted.Config{Replies: []scripted.Reply{{Text: "hello there"}}}},
		{agentloop.Plugin, agentloop.Config{}},
		{agentcontroller.Plugin, nil},
		{sessions.Plugin, sessions.Options{NewHub: sessions.LiveHubs}},
	} {
		f, _ := root.Plugin(p.plugin, p.config)
		_ = f.Await(ctx)
	}
	ctl, _ := sessions.Key.Get(root)
	var svc sessions.Service = ctl

	info, err := svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{
		Agent: "coder", SessionID: "demo", Options: sessions.AgentOptions{Provider: "scripted"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer svc.Close(ctx, info.ID)
	fmt.Println("session", info.ID, info.How)

	stream, _ := svc.Attach(ctx, info.ID, sessions.AttachOptions{})
	defer stream.Close()
	turn, err := svc.Prompt(ctx, info.ID, sessions.PromptRequest{RequestID: "req-1", Content: "hi"})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := turn.Wait(ctx)
	fmt.Println("request", res.RequestID, res.Outcome, "in turn", res.Turn, "which ended", res.End.Reason)

	// The stream holds the same turn, event by event, from seq 1.
	for stream.LastSeq() < res.End.Seq {
		u, err := stream.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		if u.Kind == live.KindEvent && u.Event.Type == session.AssistantMessage {
			fmt.Println("assistant:", u.Event.Message.Content)
		}
	}
	// Output:
	// session demo created
	// request req-1 delivered in turn 1 which ended completed
	// assistant: hello there
}
