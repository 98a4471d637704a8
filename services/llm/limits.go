package llm

import "fmt"

// Limits bound what one model response may hold. A provider answers with
// whatever it streams; without a bound, one response of a gigabyte took
// that much memory several times over, was stored in the session and sent
// back to the provider on the next step. Zero fields take the defaults.
type Limits struct {
	// MaxTextBytes bounds one message's answer text. Past it the answer is
	// cut there, the rest of the stream is not read, and the step ends as
	// if the model hit its output token limit (finish max-tokens).
	MaxTextBytes int `koanf:"max_text_bytes" json:"max_text_bytes,omitempty"`
	// MaxReasoningBytes bounds one message's reasoning, in the same way.
	MaxReasoningBytes int `koanf:"max_reasoning_bytes" json:"max_reasoning_bytes,omitempty"`
	// MaxToolArgumentBytes bounds one tool call's arguments. A call over
	// it does not run: its arguments are dropped, the model gets an error
	// result saying why, and the rest of the stream is not read.
	MaxToolArgumentBytes int `koanf:"max_tool_argument_bytes" json:"max_tool_argument_bytes,omitempty"`
	// MaxToolCalls bounds the tool calls of one step. The first call over
	// it is answered with an error and the rest of the stream is not read.
	MaxToolCalls int `koanf:"max_tool_calls" json:"max_tool_calls,omitempty"`
	// MaxSubagentCalls bounds the calls of one step that start a subagent
	// (tools.Tool.Spawns); the calls over it are answered with an error.
	MaxSubagentCalls int `koanf:"max_subagent_calls" json:"max_subagent_calls,omitempty"`
}

// The defaults of Limits: far above what a model writes in one message
// (a 1 MiB answer is some 250,000 tokens), far below what hurts a host.
const (
	DefaultMaxTextBytes         = 1 << 20
	DefaultMaxReasoningBytes    = 1 << 20
	DefaultMaxToolArgumentBytes = 1 << 20
	DefaultMaxToolCalls         = 64
	DefaultMaxSubagentCalls     = 8
)

// WithDefaults returns l with every unset (zero or negative) field at its
// default.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxTextBytes, DefaultMaxTextBytes)
	def(&l.MaxReasoningBytes, DefaultMaxReasoningBytes)
	def(&l.MaxToolArgumentBytes, DefaultMaxToolArgumentBytes)
	def(&l.MaxToolCalls, DefaultMaxToolCalls)
	def(&l.MaxSubagentCalls, DefaultMaxSubagentCalls)
	return l
}

// Over returns l with every field that o sets taken from o: an agent's own
// limits over the config's.
func (l Limits) Over(o Limits) Limits {
	take := func(v *int, x int) {
		if x > 0 {
			*v = x
		}
	}
	take(&l.MaxTextBytes, o.MaxTextBytes)
	take(&l.MaxReasoningBytes, o.MaxReasoningBytes)
	take(&l.MaxToolArgumentBytes, o.MaxToolArgumentBytes)
	take(&l.MaxToolCalls, o.MaxToolCalls)
	take(&l.MaxSubagentCalls, o.MaxSubagentCalls)
	return l
}

// Check reports a negative field, naming it under at (a config key path).
func (l Limits) Check(at string) error {
	for _, f := range []struct {
		key string
		v   int
	}{
		{"max_text_bytes", l.MaxTextBytes}, {"max_reasoning_bytes", l.MaxReasoningBytes},
		{"max_tool_argument_bytes", l.MaxToolArgumentBytes}, {"max_tool_calls", l.MaxToolCalls},
		{"max_subagent_calls", l.MaxSubagentCalls},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s.%s is %d; it must be positive (0 or unset: the default)", at, f.key, f.v)
		}
	}
	return nil
}
