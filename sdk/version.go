package sdk

// Version is this SDK's own version, released as the module
// github.com/dsh-go/dsh/sdk (tags sdk/vX.Y.Z). It moves independently of
// dsh's: what a plugin and a host must agree on is ProtocolVersion, and
// docs/plugins.md lists which SDK versions speak which protocol versions.
const Version = "0.1.0"

// sdkName is what Describe reports as the SDK that built the plugin.
const sdkName = "go/" + Version
