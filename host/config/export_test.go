package config

// SetBuiltinsForTest replaces the built-in presets until restore is called.
func SetBuiltinsForTest(f func() []BuiltinPreset) (restore func()) {
	old := builtins
	builtins = f
	return func() { builtins = old }
}
