package context

// Plugin is the unit of behaviour mounted on the tree. Apply runs inside a
// fresh fiber; everything it registers through ctx belongs to that fiber and
// is undone when the fiber is disposed or unloaded.
//
// Apply may be called more than once over a fiber's life: a plugin whose
// injected service goes away is unloaded and applied again with a new ctx when
// a provider returns. It should therefore keep no state outside what it
// registers through ctx.
//
// Write plugins with Define, which types the config; implement the
// interface by hand only where a plugin is a value with state of its own
// (a plugin binary's proxy, a catalog).
type Plugin interface {
	Apply(ctx *Context, config any) error
}

// Named is implemented by plugins that have a name worth logging. Without it
// the fiber is named after the plugin's Go type.
type Named interface {
	Name() string
}

// Injector is implemented by plugins that depend on services. The plugin is
// applied only while every listed key has an active provider.
type Injector interface {
	Inject() []ServiceKey
}
