package sdk

import "slices"

// Require names capabilities the plugin cannot work without, beyond what
// its listeners imply: a host that lacks one refuses to start it with
// PLUGIN_UNSUPPORTED, naming what is missing.
func (p *Plugin) Require(capabilities ...string) { p.requires = append(p.requires, capabilities...) }

// HostCapabilities is what the host said it offers when it described the
// plugin (nil before, and from a host older than capabilities): the events
// it bridges and its features ("tools", "emit-batch"), for a plugin that
// adapts to an older host instead of requiring.
func (p *Plugin) HostCapabilities() []string {
	caps, _ := p.hostCaps.Load().([]string)
	return slices.Clone(caps)
}
