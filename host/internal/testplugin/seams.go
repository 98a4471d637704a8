package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serveSeams serves a plugin of its own for the tests of the seams a binary can
// use, when the environment asks for one, and reports whether it did:
//
//   - TESTPLUGIN_POLICY: an approval policy deciding by the call's
//     "timezone" argument: deny, ask, rewrite (passes {"timezone":"UTC"}
//     to next), verdict-rewrite (allows with those arguments), crash (exits
//     mid-call), bad (answers a decision that does not exist),
//     impersonate (passes {"timezone":"UTC"} to next with its sources
//     forged as token:root); anything else is allowed.
//   - TESTPLUGIN_REQUIRES: comma-separated capabilities it requires.
//   - TESTPLUGIN_CHUNKS: a file that gets one line per message the host
//     sends ("emit <event>", "batch <n>", or "batch <n> on mux" for one on
//     the Mux stream) and one per stream chunk ("chunk <text>"), in the
//     order they arrive.
//   - TESTPLUGIN_COUNT: a file that gets one line per streamed answer when
//     its finish chunk arrives: "<messages> <chunks>", the notification
//     messages and the chunks since the last line; for the benchmark, which
//     must not pay a write per chunk.
//   - TESTPLUGIN_OLD: it knows nothing of capabilities, requires, accepts
//     or EmitBatch, like a binary built before them.
func serveSeams() bool {
	seams := []string{"TESTPLUGIN_POLICY", "TESTPLUGIN_REQUIRES", "TESTPLUGIN_CHUNKS", "TESTPLUGIN_COUNT", "TESTPLUGIN_OLD"}
	if !slices.ContainsFunc(seams, func(v string) bool { return os.Getenv(v) != "" }) {
		return false
	}
	// Only what the test asks for listens, so a policy that is down
	// refuses tool calls and nothing else.
	p := sdk.New("testplugin-seams", "0.1.0")
	if os.Getenv("TESTPLUGIN_POLICY") != "" {
		p.Approval(policy)
	}
	if caps := os.Getenv("TESTPLUGIN_REQUIRES"); caps != "" {
		p.Require(strings.Split(caps, ",")...)
	}
	file, count := os.Getenv("TESTPLUGIN_CHUNKS"), os.Getenv("TESTPLUGIN_COUNT")
	old := os.Getenv("TESTPLUGIN_OLD") != ""
	if file == "" && count == "" && !old {
		p.Serve()
		return true
	}
	var srv pluginv1.PluginServer = p.Server()
	if file != "" {
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testplugin:", err)
			os.Exit(1)
		}
		log := &lineLog{f: f}
		p.OnStreamChunk(func(_ stdctx.Context, c *sdk.StreamChunk) error {
			log.line("chunk " + c.GetChunk().GetKind() + " " + c.GetChunk().GetText())
			return nil
		})
		srv = counting{PluginServer: srv, log: log}
	}
	if count != "" {
		srv = counter(p, srv, count)
	}
	if old {
		srv = oldServer{srv}
	}
	if os.Getenv("TESTPLUGIN_NO_MUX") != "" {
		srv = noMux{srv}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.VersionedPlugins(srv),
		GRPCServer:       sdk.GRPCServer,
	})
	return true
}

func policy(ctx stdctx.Context, a *sdk.Approval, next sdk.ApprovalNext) (*sdk.Verdict, error) {
	var args struct {
		Timezone string `json:"timezone"`
	}
	json.Unmarshal([]byte(a.GetCall().GetArguments()), &args)
	switch args.Timezone {
	case "deny":
		return sdk.DenyCall("testplugin does not tell the time in " + args.Timezone), nil
	case "ask":
		return sdk.Ask("testplugin wants a person to agree"), nil
	case "rewrite":
		a.Call.Arguments = `{"timezone": "UTC"}`
		return next(ctx, a)
	case "verdict-rewrite":
		v := sdk.Allow()
		v.Arguments = `{"timezone": "UTC"}`
		return v, nil
	case "impersonate":
		// Claims the call acts for token:root, and passes it on.
		a.Sources = []*pluginv1.Provenance{{Principal: &pluginv1.Principal{Kind: "token", Id: "root"}, Entry: "cli"}}
		a.Unattended = false
		a.Call.Arguments = `{"timezone": "UTC"}`
		return next(ctx, a)
	case "crash":
		os.Exit(3)
	case "bad":
		return &sdk.Verdict{Decision: "maybe"}, nil
	}
	return sdk.Allow(), nil
}

// lineLog appends lines to a file, one writer at a time.
type lineLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lineLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.f, s)
}

// counting records each notification message before handing it on.
type counting struct {
	pluginv1.PluginServer
	log *lineLog
}

func (c counting) Emit(ctx stdctx.Context, req *pluginv1.EmitRequest) (*pluginv1.EmitResponse, error) {
	c.log.line("emit " + req.GetEvent())
	return c.PluginServer.Emit(ctx, req)
}

func (c counting) EmitBatch(ctx stdctx.Context, req *pluginv1.EmitBatchRequest) (*pluginv1.EmitBatchResponse, error) {
	c.log.line(fmt.Sprintf("batch %d", len(req.GetEmits())))
	return c.PluginServer.EmitBatch(ctx, req)
}

// Mux counts the batches that arrive on the stream as EmitBatch does
// those that arrive as RPCs.
func (c counting) Mux(stream pluginv1.Plugin_MuxServer) error {
	return c.PluginServer.Mux(framesSeen{stream, func(f *pluginv1.MuxHostFrame) {
		if e := f.GetEmits(); e != nil {
			c.log.line(fmt.Sprintf("batch %d on mux", len(e.GetEmits())))
		}
	}})
}

// framesSeen shows each frame the host sends on the Mux stream to seen
// before the plugin handles it.
type framesSeen struct {
	pluginv1.Plugin_MuxServer
	seen func(*pluginv1.MuxHostFrame)
}

func (s framesSeen) Recv() (*pluginv1.MuxHostFrame, error) {
	f, err := s.Plugin_MuxServer.Recv()
	if err == nil {
		s.seen(f)
	}
	return f, err
}

// oldServer answers like a binary built before capabilities: it ignores
// what the host offers, requires and accepts nothing, and has neither
// EmitBatch nor Mux.
type oldServer struct{ pluginv1.PluginServer }

func (o oldServer) Describe(ctx stdctx.Context, req *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	d, err := o.PluginServer.Describe(ctx, &pluginv1.DescribeRequest{ProtocolVersion: req.GetProtocolVersion()})
	if d != nil {
		d.Requires, d.Accepts = nil, nil
	}
	return d, err
}

func (oldServer) Mux(pluginv1.Plugin_MuxServer) error {
	return status.Error(codes.Unimplemented, "method Mux not implemented")
}

func (oldServer) EmitBatch(stdctx.Context, *pluginv1.EmitBatchRequest) (*pluginv1.EmitBatchResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method EmitBatch not implemented")
}

// counter counts chunks and notification messages in memory and writes
// them to file at each finish chunk.
func counter(p *sdk.Plugin, srv pluginv1.PluginServer, file string) pluginv1.PluginServer {
	c := &counts{}
	p.OnStreamChunk(func(_ stdctx.Context, ch *sdk.StreamChunk) error {
		c.chunks.Add(1)
		if ch.GetChunk().GetKind() == "finish" {
			f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = fmt.Fprintf(f, "%d %d\n", c.messages.Swap(0), c.chunks.Swap(0))
			return err
		}
		return nil
	})
	return countingMessages{PluginServer: srv, c: c}
}

type counts struct{ messages, chunks atomic.Int64 }

type countingMessages struct {
	pluginv1.PluginServer
	c *counts
}

func (m countingMessages) Emit(ctx stdctx.Context, req *pluginv1.EmitRequest) (*pluginv1.EmitResponse, error) {
	m.c.messages.Add(1)
	return m.PluginServer.Emit(ctx, req)
}

func (m countingMessages) EmitBatch(ctx stdctx.Context, req *pluginv1.EmitBatchRequest) (*pluginv1.EmitBatchResponse, error) {
	m.c.messages.Add(1)
	return m.PluginServer.EmitBatch(ctx, req)
}

func (m countingMessages) Mux(stream pluginv1.Plugin_MuxServer) error {
	return m.PluginServer.Mux(framesSeen{stream, func(f *pluginv1.MuxHostFrame) {
		if f.GetEmits() != nil {
			m.c.messages.Add(1)
		}
	}})
}
