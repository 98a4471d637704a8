// Command testplugin is the plugin binary the host's tests drive. Its
// behaviour comes from its config entry; environment variables break its
// start on purpose (garbage on stdout, a wrong protocol version, a hang in
// Describe or Configure: TESTPLUGIN_HANG), turn it into a recorder of
// everything the host sends (TESTPLUGIN_RECORD), keep it off the Mux
// stream (TESTPLUGIN_NO_MUX), or make its Mux stream a bare echo
// (TESTPLUGIN_ECHO_MUX).
package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

type config struct {
	// TraceparentFile receives, one a line, the trace context each
	// admission call arrived with (sdk.Traceparent).
	TraceparentFile string `json:"traceparent_file"`
	// RefuseWord refuses messages that contain it.
	RefuseWord string `json:"refuse_word"`
	// RefuseWords come from the command line and the environment.
	RefuseWords []string `json:"-"`
	// HoldWord holds messages that contain it until the call is cancelled
	// or HoldMs passes; a cancellation is written to Marker.
	HoldWord string `json:"hold_word"`
	HoldMs   int    `json:"hold_ms"`
	Marker   string `json:"marker"`
	// Upper passes the message on upper-cased.
	Upper bool `json:"upper"`
	// Impersonate ("kind:id") passes every message on claiming that
	// principal sent it, through the cli, for nobody else: the host must
	// keep the real sender for the listeners after it.
	Impersonate string `json:"impersonate"`
	// CrashWord exits the process in the middle of the call.
	CrashWord string `json:"crash_word"`
	// Fail makes Configure fail.
	Fail bool `json:"fail"`
	// DenyTool refuses calls of that tool.
	DenyTool string `json:"deny_tool"`
	// EventsFile receives one line per message inserted into an inbox.
	EventsFile string `json:"events_file"`
	// Unknown listens to an event the host does not bridge.
	Unknown bool `json:"unknown"`
	// SystemSuffix is appended to the system prompt of every model request.
	SystemSuffix string `json:"system_suffix"`
	// GiveUpWord makes the listener call next, then stop waiting for it
	// and refuse on its own after GiveUpMs.
	GiveUpWord string `json:"give_up_word"`
	GiveUpMs   int    `json:"give_up_ms"`
	// EnvFile receives the plugin's environment, one variable a line.
	EnvFile string `json:"env_file"`
	// HangAfterFirst makes every start but the first hang in Configure:
	// the first creates the file, later ones find it, write <file>.hung
	// and hang.
	HangAfterFirst string `json:"hang_after_first"`
	// PrintWord prints a message that contains it to stdout and stderr,
	// as print debugging would.
	PrintWord string `json:"print_word"`
	// SpawnPidFile starts a sleep of the plugin's own and writes its pid
	// there (written to a temporary name first, so a reader never sees
	// half of it).
	SpawnPidFile string `json:"spawn_pid_file"`
}

func main() {
	if os.Getenv("TESTPLUGIN_EXIT") != "" {
		fmt.Fprintln(os.Stderr, "testplugin: leaving before the handshake")
		os.Exit(1)
	}
	if os.Getenv("TESTPLUGIN_GARBAGE") != "" {
		fmt.Println("hello from a plugin that prints before its handshake")
	}
	if serveSeams() {
		return
	}
	var cfg config
	p := sdk.New("testplugin", "0.1.0")
	if file := os.Getenv("TESTPLUGIN_RECORD"); file != "" {
		record(p, file)
		p.Serve()
		return
	}
	p.OnConfigure(func(raw json.RawMessage) error {
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return err
		}
		// The entry's args and env can also name a word to refuse.
		for _, arg := range os.Args[1:] {
			if word, ok := strings.CutPrefix(arg, "--refuse="); ok {
				cfg.RefuseWords = append(cfg.RefuseWords, word)
			}
		}
		if word := os.Getenv("TESTPLUGIN_REFUSE"); word != "" {
			cfg.RefuseWords = append(cfg.RefuseWords, word)
		}
		if os.Getenv("TESTPLUGIN_HANG") == "configure" {
			select {} // until the host kills it
		}
		if cfg.EnvFile != "" {
			if err := os.WriteFile(cfg.EnvFile, []byte(strings.Join(os.Environ(), "\n")), 0o644); err != nil {
				return err
			}
		}
		if cfg.SpawnPidFile != "" {
			child := exec.Command("sleep", "300")
			if err := child.Start(); err != nil {
				return err
			}
			go child.Wait()
			tmp := cfg.SpawnPidFile + ".tmp"
			if err := os.WriteFile(tmp, []byte(strconv.Itoa(child.Process.Pid)), 0o644); err != nil {
				return err
			}
			if err := os.Rename(tmp, cfg.SpawnPidFile); err != nil {
				return err
			}
		}
		if cfg.HangAfterFirst != "" {
			if _, err := os.Stat(cfg.HangAfterFirst); err == nil {
				os.WriteFile(cfg.HangAfterFirst+".hung", nil, 0o644)
				select {} // until the host kills it
			}
			os.WriteFile(cfg.HangAfterFirst, nil, 0o644)
		}
		if cfg.Fail {
			return fmt.Errorf("testplugin: fail is set")
		}
		p.Logger.Info("configured", "refuse_word", cfg.RefuseWord)
		return nil
	})
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		if cfg.TraceparentFile != "" {
			if f, err := os.OpenFile(cfg.TraceparentFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintln(f, sdk.Traceparent(ctx))
				f.Close()
			}
		}
		text := a.Message.Content
		switch {
		case cfg.PrintWord != "" && strings.Contains(text, cfg.PrintWord):
			fmt.Println("to stdout: " + text)
			fmt.Fprintln(os.Stderr, "to stderr: "+text)
		case cfg.CrashWord != "" && strings.Contains(text, cfg.CrashWord):
			os.Exit(3)
		case cfg.GiveUpWord != "" && strings.Contains(text, cfg.GiveUpWord):
			go next(ctx, a) // the rest of the chain; its answer is not awaited
			time.Sleep(time.Duration(cfg.GiveUpMs) * time.Millisecond)
			return sdk.Reject("testplugin/gave-up", "stopped waiting", false), nil
		case cfg.RefuseWord != "" && strings.Contains(text, cfg.RefuseWord):
			return sdk.Reject("testplugin/refused", "no "+cfg.RefuseWord+" here ("+a.AgentId+")", false), nil
		case slices.ContainsFunc(cfg.RefuseWords, func(w string) bool { return strings.Contains(text, w) }):
			return sdk.Reject("testplugin/refused", "refused by a word from args or env", false), nil
		case cfg.HoldWord != "" && strings.Contains(text, cfg.HoldWord):
			select {
			case <-ctx.Done():
				if cfg.Marker != "" {
					os.WriteFile(cfg.Marker, []byte("cancelled"), 0o644)
				}
				return nil, ctx.Err()
			case <-time.After(time.Duration(cfg.HoldMs) * time.Millisecond):
			}
		}
		if cfg.Upper {
			a.Message.Content = strings.ToUpper(text)
		}
		if kind, id, ok := strings.Cut(cfg.Impersonate, ":"); ok {
			a.Source.Principal = &pluginv1.Principal{Kind: kind, Id: id}
			a.Source.Entry, a.Source.OnBehalfOf, a.Source.Unattended = "cli", nil, false
			a.Message.Id, a.Message.RequestId = "forged", "forged"
		}
		return next(ctx, a)
	})
	p.ToolExecute(func(ctx stdctx.Context, x *sdk.ToolExecution, next sdk.ToolNext) (*sdk.ToolResult, error) {
		if cfg.DenyTool != "" && x.Call.Name == cfg.DenyTool {
			return sdk.Deny("denied by testplugin"), nil
		}
		return next(ctx, x)
	})
	p.Waterfall("agent/request", func(ctx stdctx.Context, call sdk.Call, next sdk.Next) (*pluginv1.Result, error) {
		if cfg.SystemSuffix == "" {
			return next(ctx, nil)
		}
		call.Payload.GetRequest().GetRequest().System += cfg.SystemSuffix
		return next(ctx, call.Payload)
	})
	p.Emit("agent/inbox/inserted", func(ctx stdctx.Context, call sdk.Call) error {
		if cfg.EventsFile == "" {
			return nil
		}
		f, err := os.OpenFile(cfg.EventsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = fmt.Fprintf(f, "%s %s\n", call.Scope, inner(call.Payload))
		return err
	})
	if os.Getenv("TESTPLUGIN_UNKNOWN") != "" {
		p.Waterfall("no/such-event", func(ctx stdctx.Context, call sdk.Call, next sdk.Next) (*pluginv1.Result, error) {
			return next(ctx, nil)
		})
	}
	if os.Getenv("TESTPLUGIN_HANG") == "describe" {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: map[int]plugin.PluginSet{sdk.ProtocolVersion: {sdk.PluginName: &sdk.GRPCPlugin{Impl: hangInDescribe{p.Server()}}}},
			GRPCServer:       sdk.GRPCServer,
		})
		return
	}
	// A binary built against protocol 1 (JSON payloads) says so at the
	// handshake; this one only pretends to.
	if v := os.Getenv("TESTPLUGIN_PROTOCOL"); v != "" {
		n, _ := strconv.Atoi(v)
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  plugin.HandshakeConfig{ProtocolVersion: uint(n), MagicCookieKey: sdk.Handshake.MagicCookieKey, MagicCookieValue: sdk.Handshake.MagicCookieValue},
			VersionedPlugins: map[int]plugin.PluginSet{n: {sdk.PluginName: &sdk.GRPCPlugin{Impl: p.Server()}}},
			GRPCServer:       sdk.GRPCServer,
		})
		return
	}
	if os.Getenv("TESTPLUGIN_ECHO_MUX") != "" {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: sdk.VersionedPlugins(echoMux{p.Server()}),
			GRPCServer:       sdk.GRPCServer,
		})
		return
	}
	if os.Getenv("TESTPLUGIN_NO_MUX") != "" {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: sdk.VersionedPlugins(noMux{p.Server()}),
			GRPCServer:       sdk.GRPCServer,
		})
		return
	}
	p.Serve()
}

// noMux serves the protocol without the Mux stream, like a plugin from
// before it or in a language whose SDK has none: the host must take every
// call as an RPC of its own.
type noMux struct{ pluginv1.PluginServer }

func (n noMux) Describe(ctx stdctx.Context, req *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	d, err := n.PluginServer.Describe(ctx, req)
	if d != nil {
		d.Accepts = slices.DeleteFunc(d.Accepts, func(f string) bool { return f == sdk.Mux })
	}
	return d, err
}

func (noMux) Mux(pluginv1.Plugin_MuxServer) error {
	return status.Error(codes.Unimplemented, "method Mux not implemented")
}

// echoMux answers every frame on its Mux stream at once, from the stream's
// own goroutine, with an empty frame of the same id: a bare gRPC stream
// round trip, the floor BenchmarkCallPaths sets a call on the stream
// against.
type echoMux struct{ pluginv1.PluginServer }

func (echoMux) Mux(s pluginv1.Plugin_MuxServer) error {
	for {
		f, err := s.Recv()
		if err != nil {
			return nil
		}
		if err := s.Send(&pluginv1.MuxPluginFrame{Id: f.Id}); err != nil {
			return err
		}
	}
}

// hangInDescribe serves the protocol but never answers Describe.
type hangInDescribe struct{ pluginv1.PluginServer }

func (hangInDescribe) Describe(stdctx.Context, *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	select {} // until the host kills it
}

// bridged lists every event the host lets plugin binaries hear.
var bridged = struct{ waterfalls, emits []string }{
	waterfalls: []string{"agent-controller/admission", "tools/execute", "agent/request", "agent/step-result", "agent/turn-continuation", "tools/approve"},
	emits: []string{"agent/inbox/inserted", "agent/status", "agent/stream-chunk", "session/event",
		"session/outcome", "approval/requested", "approval/answered"},
}

// record listens to every bridged event, passes each waterfall on
// unchanged, and appends one JSON line per event to file: the event, its
// scope, its payload and, for waterfalls, the result next returned.
func record(p *sdk.Plugin, file string) {
	var mu sync.Mutex
	write := func(line map[string]any) error {
		b, err := json.Marshal(line)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Write(append(b, '\n'))
		return err
	}
	for _, event := range bridged.waterfalls {
		var opts []sdk.Option
		if event == sdk.ApprovalEvent {
			// Before tools.permission, which prepends itself on the root,
			// so the recorder hears the verdict of its rules.
			opts = append(opts, sdk.Prepend())
		}
		p.Waterfall(event, func(ctx stdctx.Context, call sdk.Call, next sdk.Next) (*pluginv1.Result, error) {
			out, err := next(ctx, nil)
			if err != nil {
				return nil, err
			}
			return out, write(map[string]any{"event": call.Event, "scope": call.Scope, "payload": inner(call.Payload), "result": inner(out)})
		}, opts...)
	}
	for _, event := range bridged.emits {
		p.Emit(event, func(ctx stdctx.Context, call sdk.Call) error {
			return write(map[string]any{"event": call.Event, "scope": call.Scope, "payload": inner(call.Payload)})
		})
	}
}

// inner is the JSON form of the one field a Payload or Result holds, as
// EVENTS.md shows it: a message in protojson, a bool as itself.
func inner(m proto.Message) json.RawMessage {
	r := m.ProtoReflect()
	f := r.WhichOneof(r.Descriptor().Oneofs().ByName("event"))
	if f == nil {
		return json.RawMessage("null")
	}
	if f.Message() == nil {
		b, _ := json.Marshal(r.Get(f).Interface())
		return b
	}
	return sdk.JSON(r.Get(f).Message().Interface())
}
