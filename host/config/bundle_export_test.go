package config

// SetPartPluginsForTest makes bundles mount their skills and commands
// through the plugins skills and commands until restore is called.
func SetPartPluginsForTest(skills, commands string) (restore func()) {
	oldS, oldC := skillsPlugin, commandsPlugin
	skillsPlugin, commandsPlugin = skills, commands
	return func() { skillsPlugin, commandsPlugin = oldS, oldC }
}
