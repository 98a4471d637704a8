// Command faultplugin is a plugin binary that misbehaves on request, for
// the fault suite. Its arguments pick the fault:
//
//	--hang=handshake   never print the handshake line
//	--hang=describe    handshake, then never answer Describe
//	--hang=configure   never return from Configure
//	--hang=shutdown    ignore the host's stop, and leave a grandchild
//	                   (its pid in --pidfile) holding the output pipes
//	--hold-tool=NAME   hold every call of tool NAME until it is cancelled,
//	                   after creating the file --marker (the test's signal)
package main

import (
	stdctx "context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-plugin"
)

func main() {
	hang := flag.String("hang", "", "handshake, describe, configure or shutdown")
	holdTool := flag.String("hold-tool", "", "the tool whose calls are held")
	marker := flag.String("marker", "", "created when a held call starts")
	pidfile := flag.String("pidfile", "", "receives the grandchild's pid (--hang=shutdown)")
	flag.Parse()

	if *hang == "handshake" {
		select {} // go-plugin waits for a line that never comes
	}
	p := sdk.New("faultplugin", "0.1.0")
	p.OnConfigure(func(json.RawMessage) error {
		if *hang == "configure" {
			select {}
		}
		return nil
	})
	if *holdTool != "" {
		p.ToolExecute(func(ctx stdctx.Context, x *sdk.ToolExecution, next sdk.ToolNext) (*sdk.ToolResult, error) {
			if x.GetCall().GetName() != *holdTool {
				return next(ctx, x)
			}
			if *marker != "" {
				os.WriteFile(*marker, nil, 0o644)
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
	}
	switch *hang {
	case "describe":
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: sdk.VersionedPlugins(silentDescribe{p.Server()}),
			GRPCServer:       plugin.DefaultGRPCServer,
		})
		return
	case "shutdown":
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		// The grandchild shares stdout and stderr, the pipes go-plugin
		// copies until they close: only a kill of the whole group ends it.
		child := exec.Command("sleep", "600")
		child.Stdout, child.Stderr = os.Stdout, os.Stderr
		if err := child.Start(); err == nil && *pidfile != "" {
			os.WriteFile(*pidfile, []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		}
		p.Serve()
		select {} // the host asked us to stop; we do not
	}
	p.Serve()
}

// silentDescribe serves the protocol but never answers Describe.
type silentDescribe struct{ pluginv1.PluginServer }

func (silentDescribe) Describe(ctx stdctx.Context, _ *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	<-ctx.Done()
	select {}
}
