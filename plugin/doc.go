// Package plugin is where in-process plugins register, so config entries can
// mount them by id. It is a leaf: it imports the context tree and errs, never
// the config loader or the plugin-binary bridge, so a plugin that registers
// a tool or a listener links neither gRPC nor koanf (Caddy's modules.go is
// the model).
//
// A plugin is written once, with its id, a one-line doc, a typed config and
// the services it injects:
//
//	var Plugin = plugin.Register("tools.clock", "a tool that tells the time",
//		func(ctx *dshctx.Context, cfg Config) error { ... }, tools.Key)
//
// The config type carries its own defaults and checks, so `dsh config check`
// and a Go caller applying Plugin see the same rules:
//
//	func (Config) Defaults() Config { return Config{Dir: "sessions"} }
//	func (c Config) Validate() error { ... }
//
// A plugin that takes no config uses None.
//
// Register is dshctx.Define plus this registry: the config conversion and
// checks are Define's, shared with the core services, which are defined
// the same way but not registered, so no config entry can mount them.
package plugin
