package host

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// describeBundles adds to dsh config check's tree what each bundle: and
// mcp_json: entry mounted, what it reads from dsh's environment, and what
// it does not mount — the part an operator cannot see in the config file.
func describeBundles(b *strings.Builder, reports []config.BundleReport) {
	if len(reports) == 0 {
		return
	}
	b.WriteString("bundles:\n")
	for _, r := range reports {
		name := ""
		if r.Name != "" {
			name = fmt.Sprintf(" %q", r.Name)
		}
		fmt.Fprintf(b, "  %s: %s%s %s\n", r.At, r.Kind, name, r.Path)
		fmt.Fprintf(b, "    mounts: %s\n", orNone(r.Entries))
		if len(r.Vars) > 0 {
			fmt.Fprintf(b, "    reads from dsh's environment: %s\n", strings.Join(r.Vars, ", "))
		}
		for _, n := range r.Notes {
			fmt.Fprintf(b, "    note: %s\n", n)
		}
	}
}

// logBundleNotes says at start what bundles do not mount, so a part that
// is left out is never silent.
func logBundleNotes(log hclog.Logger, cfg *config.Config) {
	for _, r := range cfg.Bundles() {
		for _, n := range r.Notes {
			log.Warn("part of a bundle is not mounted or ignored", "entry", r.At, r.Kind, r.Path, "note", n)
		}
	}
}
