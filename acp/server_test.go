package acp_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/llm"
)

func TestInitializeAdvertisesWhatDshDoes(t *testing.T) {
	e := newEnv(t, envOpts{})
	r, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: 7})
	if err != nil {
		t.Fatal(err)
	}
	c := r.AgentCapabilities
	if r.ProtocolVersion != 1 || !c.LoadSession || c.PromptCapabilities.Image || !c.PromptCapabilities.EmbeddedContext ||
		c.McpCapabilities.Http || c.SessionCapabilities.List == nil || c.SessionCapabilities.Close == nil || c.SessionCapabilities.Resume == nil {
		t.Fatalf("%+v", r)
	}
	if r.AgentInfo == nil || r.AgentInfo.Name != "dsh" || r.AgentInfo.Version != "test" {
		t.Fatalf("agent info %+v", r.AgentInfo)
	}
	if s, _ := c.Meta["steering"].(map[string]any); s["method"] != "_session/steering" {
		t.Fatalf("steering not advertised: %v", c.Meta)
	}
}

func TestPromptStreamsTheAnswerAndEndsTheTurn(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Reasoning: "thinking hard", Text: "hello there editor", Usage: &llm.Usage{InputTokens: 10, OutputTokens: 5}}}})
	id := e.newSession()
	r, err := e.prompt(id, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop %q", r.StopReason)
	}
	ns := e.c.all()
	if got := agentText(ns); got != "hello there editor" {
		t.Fatalf("answer %q: %s", got, dump(ns))
	}
	e.c.waitFor(t, "thought", func(u acp.SessionUpdate) bool { return u.AgentThoughtChunk != nil })
	e.c.waitFor(t, "usage", func(u acp.SessionUpdate) bool { return u.UsageUpdate != nil && u.UsageUpdate.Used == 15 })
	e.c.waitFor(t, "commands", func(u acp.SessionUpdate) bool {
		return u.AvailableCommandsUpdate != nil && len(u.AvailableCommandsUpdate.AvailableCommands) == 4
	})
	e.c.waitFor(t, "title", func(u acp.SessionUpdate) bool {
		return u.SessionInfoUpdate != nil && u.SessionInfoUpdate.Title != nil && *u.SessionInfoUpdate.Title == "hi"
	})
	for _, n := range ns {
		if n.SessionId != id {
			t.Fatalf("update of session %q", n.SessionId)
		}
		if n.Update.UserMessageChunk != nil {
			t.Fatal("a live prompt was echoed back to the client that sent it")
		}
	}
}

func TestNewSessionAdvertisesModes(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: 1})
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Modes == nil || r.Modes.CurrentModeId != "workspace-write" || len(r.Modes.AvailableModes) != 3 {
		t.Fatalf("%+v", r.Modes)
	}
	if _, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: "relative/dir", McpServers: []acp.McpServer{}}); rpcCode(err) != -32602 {
		t.Fatalf("relative cwd: %v", err)
	}
	if _, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: "/no/such/dir", McpServers: []acp.McpServer{}}); err == nil {
		t.Fatal("a missing cwd opened a session")
	}
}

// The turn's end maps onto stopReason; a failed turn is an error.
func TestStopReasons(t *testing.T) {
	cases := []struct {
		name  string
		opts  envOpts
		stop  acp.StopReason
		error int
	}{
		{"max tokens", envOpts{replies: []scripted.Reply{{Text: "cut", Finish: "max-tokens"}}}, acp.StopReasonMaxTokens, 0},
		{"max steps", envOpts{agent: "    max_steps: 1\n", mode: "full-access", extra: "  - use: tools.clock\n",
			replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "clock"}}}}}, acp.StopReasonMaxTurnRequests, 0},
		{"failed", envOpts{replies: []scripted.Reply{{Finish: "error", Error: "the provider broke"}}}, "", -32013},
		// The model declining (the Anthropic adapter's words) is ACP's
		// refusal; it used to be the error -32013, a failed turn.
		{"refused", envOpts{replies: []scripted.Reply{{Finish: "error", Error: "LLM_REFUSED: the model refused to answer (stop_reason refusal)"}}}, acp.StopReasonRefusal, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.opts)
			id := e.newSession()
			r, err := e.prompt(id, "go")
			if c.error != 0 {
				if rpcCode(err) != c.error {
					t.Fatalf("%v %v", r, err)
				}
				return
			}
			if err != nil || r.StopReason != c.stop {
				t.Fatalf("%v %v", r, err)
			}
		})
	}
}

// An embedded text resource (a file the editor attached) reaches the model
// as text under its URI; an image is refused as the capabilities say
// (the scripted provider takes images, but this server was told its
// provider takes text only).
func TestEmbeddedTextResourceIsTakenAsText(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.newSession()
	res := acp.ContentBlock{Resource: &acp.ContentBlockResource{Type: "resource", Resource: acp.EmbeddedResourceResource{
		TextResourceContents: &acp.TextResourceContents{Uri: "file:///p/a.go", Text: "package a"}}}}
	r, err := e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("look at"), res}})
	if err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatal(r, err)
	}
	if got := agentText(e.c.all()); !strings.Contains(got, `<context uri="file:///p/a.go">`) || !strings.Contains(got, "package a") {
		t.Fatalf("the model did not get the resource: %q", got)
	}
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	img := acp.ContentBlock{Image: &acp.ContentBlockImage{Type: "image", Data: png, MimeType: "image/png"}}
	_, err = e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{img}})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 || re.Data.(map[string]any)["code"] != string(parts.Unsupported) {
		t.Fatalf("an image: %v", err)
	}
}

// With a provider that takes images, initialize says so and an image
// prompt runs a turn; the model hears of the image.
func TestImagePromptWhereTheProviderTakesImages(t *testing.T) {
	e := newEnv(t, envOpts{accepts: parts.Capabilities{Images: true}})
	r, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil || !r.AgentCapabilities.PromptCapabilities.Image || !r.AgentCapabilities.PromptCapabilities.EmbeddedContext {
		t.Fatalf("%+v %v", r.AgentCapabilities.PromptCapabilities, err)
	}
	id := e.newSession()
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	img := acp.ContentBlock{Image: &acp.ContentBlockImage{Type: "image", Data: png, MimeType: "image/png"}}
	pr, err := e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock("what is this?"), img}})
	if err != nil || pr.StopReason != acp.StopReasonEndTurn {
		t.Fatal(pr, err)
	}
	// The image reaches the model with its bytes: the scripted model
	// echoes it with its size.
	if got := agentText(e.c.all()); !strings.Contains(got, "what is this?") || !strings.Contains(got, "[image image/png, 16 bytes]") {
		t.Fatalf("the model did not hear of the image: %q", got)
	}
}

// TestAuthenticateWithAMethodNeverAdvertisedIsRefused: initialize
// advertises no auth method, and the protocol has authenticate name one
// that was; a request naming another used to be answered as if it had
// authenticated.
func TestAuthenticateWithAMethodNeverAdvertisedIsRefused(t *testing.T) {
	e := newEnv(t, envOpts{})
	r, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.AuthMethods) != 0 {
		t.Fatalf("auth methods %v", r.AuthMethods)
	}
	_, err = e.conn.Authenticate(e.ctx(), acp.AuthenticateRequest{MethodId: "oauth"})
	var re *acp.RequestError
	if !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(re.Message, `"oauth" was not advertised`) {
		t.Fatalf("err = %v", err)
	}
}
