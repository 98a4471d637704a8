package config

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
)

// DecodeEntry checks an entry built at run time (not read from a file,
// such as the MCP servers an editor hands over) and returns its plugin's
// decoded config, as Load does for the config's own entries. Only use:
// entries: a binary's path and checksum come from the operator's config,
// never from a client. at names the entry in errors.
func DecodeEntry(e Entry, at string) (any, error) {
	if e.Exec != "" || e.Use == "" {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("%s: only use: entries can be added at run time; name an in-process plugin", at))
	}
	info, ok := plugin.Lookup(e.Use)
	if !ok {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("%s: unknown plugin %q; registered plugins: %s", at, e.Use, strings.Join(registeredIDs(), ", ")))
	}
	if info.Config == nil {
		if len(e.Config) > 0 {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("%s: plugin %q takes no config", at, e.Use))
		}
		return nil, nil
	}
	out := info.Config()
	p := &problems{file: "entry added at run time"}
	decodeStrict(e.Config, out, at+".config", p, false)
	if len(p.list) == 0 {
		if v, ok := out.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				p.add(at+".config", messageOf(err))
			}
		}
	}
	if len(p.list) > 0 {
		return nil, errs.New(errs.InvalidArgument, strings.Join(p.list, "; "))
	}
	return out, nil
}
