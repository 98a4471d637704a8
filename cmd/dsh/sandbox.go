package main

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// landlockStatus is what the kernel offers bash's sandbox.
type landlockStatus struct {
	// ABI is the Landlock ABI version; 0 when Landlock is unavailable.
	ABI int
	// Why says why it is unavailable.
	Why string
}

// probeSandbox asks the kernel for Landlock. The tools.bash branch's
// internal/sandbox has the probe; it is wired here at merge.
var probeSandbox = func() landlockStatus {
	return landlockStatus{Why: "this dsh was built without the sandbox probe"}
}

// bashSandbox is the sandbox in force for one agent's bash.
type bashSandbox struct {
	agent string
	text  string
	// unconfined is true when bash would run, or be refused, without the
	// sandbox the config asked for: the operator must see it.
	degraded bool
}

// sandboxReport says, for each agent with a bash tool, which sandbox its
// calls run under: Landlock with its ABI, Landlock unavailable and what
// the config does then (refuse or warn), or off. The probe runs once, and
// only when some agent has bash.
func sandboxReport(cfg *config.Config) []bashSandbox {
	var out []bashSandbox
	var probed *landlockStatus
	for _, a := range cfg.Agents {
		e := bashEntry(cfg, a)
		if e == nil {
			continue
		}
		sb := sandboxSettings(cfg, e)
		line := bashSandbox{agent: a.ID}
		network := "network off"
		if sb.network {
			network = "network on"
		}
		switch {
		case sb.mode == "off":
			line.text = "off: bash runs unconfined (sandbox: {mode: off})"
		default:
			if probed == nil {
				st := probeSandbox()
				probed = &st
			}
			switch {
			case probed.ABI > 0:
				line.text = fmt.Sprintf("landlock ABI %d: writes only in %s and the temp dir, %s", probed.ABI, a.Workspace, network)
			case sb.unavailable == "warn":
				line.text, line.degraded = fmt.Sprintf("landlock unavailable (%s) → warn: bash runs unconfined, with a warning", probed.Why), true
			default:
				line.text, line.degraded = fmt.Sprintf("landlock unavailable (%s) → refuse: bash calls fail; set sandbox: {unavailable: warn} to run unconfined, or {mode: off}", probed.Why), true
			}
		}
		out = append(out, line)
	}
	return out
}

// describeSandbox renders the report for dsh config check.
func describeSandbox(cfg *config.Config) string {
	report := sandboxReport(cfg)
	if len(report) == 0 {
		return "bash sandbox: no agent has the bash tool\n"
	}
	var b strings.Builder
	b.WriteString("bash sandbox:\n")
	for _, l := range report {
		fmt.Fprintf(&b, "  %s: %s\n", l.agent, l.text)
	}
	return b.String()
}

// logSandbox reports it at start: info, or a warning when the sandbox the
// config asked for is not what bash gets.
func logSandbox(log hclog.Logger, cfg *config.Config) {
	for _, l := range sandboxReport(cfg) {
		if l.degraded {
			log.Warn("bash sandbox", "agent", l.agent, "sandbox", l.text)
		} else {
			log.Info("bash sandbox", "agent", l.agent, "sandbox", l.text)
		}
	}
}

// bashEntry returns the tools.bash entry an agent's bash comes from: its
// own presets' (the last one mounted) over the root's.
func bashEntry(cfg *config.Config, a config.AgentConfig) *config.Entry {
	var found *config.Entry
	pick := func(list []config.Entry) {
		for i := range list {
			if list[i].Use == "tools.bash" && !list[i].Disabled {
				found = &list[i]
			}
		}
	}
	pick(cfg.Plugins)
	for _, name := range a.PresetNames() {
		pick(cfg.Presets[name])
	}
	return found
}

type sandboxConfig struct {
	mode, unavailable string
	network           bool
}

// sandboxSettings reads sandbox.mode, .unavailable and .network from the
// entry's config as tools.bash decoded it, defaults included, by their
// keys: the CLI does not link the bash package's types. An empty mode is
// landlock and an empty unavailable is refuse: never a silent downgrade.
func sandboxSettings(cfg *config.Config, e *config.Entry) sandboxConfig {
	var src any = e.Config
	if decoded := cfg.PluginConfig(e); decoded != nil {
		src = decoded
	}
	sc := sandboxConfig{mode: "landlock", unavailable: "refuse"}
	if v, ok := lookupKey(src, "sandbox", "mode").(string); ok && v != "" {
		sc.mode = v
	}
	if v, ok := lookupKey(src, "sandbox", "unavailable").(string); ok && v != "" {
		sc.unavailable = v
	}
	switch v := lookupKey(src, "sandbox", "network").(type) {
	case bool:
		sc.network = v
	case *bool:
		sc.network = v != nil && *v
	}
	return sc
}

// lookupKey walks v — structs by their koanf tags, maps by key — along
// path; nil when a step is missing.
func lookupKey(v any, path ...string) any {
	rv := reflect.ValueOf(v)
	for _, key := range path {
		for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
			if rv.IsNil() {
				return nil
			}
			rv = rv.Elem()
		}
		switch rv.Kind() {
		case reflect.Map:
			if rv.Type().Key().Kind() != reflect.String {
				return nil
			}
			rv = rv.MapIndex(reflect.ValueOf(key))
			if !rv.IsValid() {
				return nil
			}
		case reflect.Struct:
			f, ok := fieldByKey(rv, key)
			if !ok {
				return nil
			}
			rv = f
		default:
			return nil
		}
	}
	if !rv.IsValid() || !rv.CanInterface() {
		return nil
	}
	return rv.Interface()
}

// fieldByKey finds the field tagged koanf:"key", also in embedded structs.
func fieldByKey(rv reflect.Value, key string) (reflect.Value, bool) {
	t := rv.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if tag == key || (tag == "" && strings.EqualFold(f.Name, key)) {
			return rv.Field(i), true
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if g, ok := fieldByKey(rv.Field(i), key); ok {
				return g, true
			}
		}
	}
	return reflect.Value{}, false
}
