package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dsh-go/dsh/host/config"
	"github.com/spf13/cobra"
)

func presetsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "presets",
		Short: "list the built-in presets, which any config can name without defining them",
		Long: `The built-in presets are the modes of an agent's tools. Name one in an
agent's preset: or presets: list. A config that defines a preset of the
same name under presets: uses its own instead.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range config.BuiltinPresets() {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", p.Name, p.Doc)
				for _, e := range p.Entries {
					fmt.Fprintf(cmd.OutOrStdout(), "    - use: %s%s\n", e.Use, inlineConfig(e.Config))
				}
			}
			return nil
		},
	}
}

// inlineConfig renders an entry's config as YAML flow style, for reading.
func inlineConfig(m map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	return "  config: " + flow(m)
}

func flow(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + flow(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, el := range x {
			parts[i] = flow(el)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}
