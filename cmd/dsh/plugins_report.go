package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/sdk"
)

// checkReport is what `dsh plugins check` prints, and its --json form.
type checkReport struct {
	OK   bool     `json:"ok"`
	Exec string   `json:"exec"`
	Args []string `json:"args,omitempty"`
	// Host is the protocol version this dsh speaks; Protocol the one the
	// handshake agreed on with the plugin.
	Host      int             `json:"host_protocol"`
	Protocol  int             `json:"protocol,omitempty"`
	Name      string          `json:"name,omitempty"`
	Version   string          `json:"version,omitempty"`
	SDK       string          `json:"sdk,omitempty"`
	Listeners []checkListener `json:"listeners"`
	Tools     []checkTool     `json:"tools"`
	Requires  []string        `json:"requires"`
	Accepts   []string        `json:"accepts"`
	Error     *errs.Error     `json:"error,omitempty"`
	described bool
}

type checkListener struct {
	Event   string `json:"event"`
	Kind    string `json:"kind"` // waterfall or emit
	Prepend bool   `json:"prepend,omitempty"`
}

type checkTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Parameters   json.RawMessage `json:"parameters,omitempty"`
	ParallelSafe bool            `json:"parallel_safe"`
	Approval     string          `json:"approval,omitempty"`
}

func newCheckReport(e config.Entry, c *execplugin.Checked, err error) *checkReport {
	r := &checkReport{OK: err == nil, Exec: e.Exec, Args: e.Args, Host: sdk.ProtocolVersion,
		Listeners: []checkListener{}, Tools: []checkTool{}, Requires: []string{}, Accepts: []string{}}
	if err != nil {
		var ok bool
		if r.Error, ok = err.(*errs.Error); !ok {
			r.Error = errs.Wrap(execplugin.PluginStartFailed, err, "the check failed")
		}
	}
	if c == nil {
		return r
	}
	d := c.Describe
	r.described = true
	r.Protocol, r.Name, r.Version, r.SDK = c.Protocol, d.GetName(), d.GetVersion(), d.GetSdk()
	r.Requires = append(r.Requires, d.GetRequires()...)
	r.Accepts = append(r.Accepts, d.GetAccepts()...)
	for _, l := range d.GetListeners() {
		kind := strings.ToLower(strings.TrimPrefix(l.GetKind().String(), "KIND_"))
		r.Listeners = append(r.Listeners, checkListener{Event: l.GetEvent(), Kind: kind, Prepend: l.GetPrepend()})
	}
	for _, t := range d.GetTools() {
		tool := checkTool{Name: t.GetName(), Description: t.GetDescription(), ParallelSafe: t.GetParallelSafe(), Approval: t.GetApproval()}
		if p := strings.TrimSpace(t.GetParameters()); p != "" && json.Valid([]byte(p)) {
			tool.Parameters = json.RawMessage(p)
		}
		r.Tools = append(r.Tools, tool)
	}
	return r
}

// print writes the report for people: what the plugin declared (when it
// got that far), then ok or the reason it would not start (which the
// caller prints as the error).
func (r *checkReport) print(w io.Writer) {
	command := strings.Join(append([]string{r.Exec}, r.Args...), " ")
	if !r.described {
		fmt.Fprintf(w, "%s: did not start\n", command)
		return
	}
	sdkName := r.SDK
	if sdkName == "" {
		sdkName = "(not reported: its SDK predates the field, or it implements the .proto itself)"
	}
	fmt.Fprintf(w, "plugin    %s %s\n", r.Name, r.Version)
	fmt.Fprintf(w, "command   %s\n", command)
	fmt.Fprintf(w, "sdk       %s\n", sdkName)
	fmt.Fprintf(w, "protocol  %d (this dsh speaks %d)\n", r.Protocol, r.Host)
	fmt.Fprintf(w, "requires  %s\n", list(r.Requires))
	fmt.Fprintf(w, "accepts   %s\n", list(r.Accepts))
	fmt.Fprintf(w, "seams     %s\n", plural(len(r.Listeners), "listener"))
	for _, l := range r.Listeners {
		first := ""
		if l.Prepend {
			first = ", prepended"
		}
		fmt.Fprintf(w, "  %s (%s%s)\n", l.Event, l.Kind, first)
	}
	fmt.Fprintf(w, "tools     %s\n", plural(len(r.Tools), "tool"))
	for _, t := range r.Tools {
		traits := "exclusive"
		if t.ParallelSafe {
			traits = "parallel-safe"
		}
		if t.Approval != "" {
			traits += ", approval " + t.Approval
		}
		fmt.Fprintf(w, "  %s (%s)\n", t.Name, traits)
		if t.Description != "" {
			fmt.Fprintf(w, "    %s\n", t.Description)
		}
		params := "(no arguments)"
		var compact bytes.Buffer
		if len(t.Parameters) > 0 && json.Compact(&compact, t.Parameters) == nil {
			params = compact.String()
		}
		fmt.Fprintf(w, "    parameters: %s\n", params)
	}
	if r.OK {
		fmt.Fprintln(w, "ok: dsh can start this plugin")
	}
}

func list(items []string) string {
	if len(items) == 0 {
		return "-"
	}
	return strings.Join(items, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
