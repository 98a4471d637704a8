package bash

import "fmt"

// Values of jobs.wake.
const (
	// WakeOn delivers a job's end to its idle agent as a message.
	WakeOn = "on"
	// WakeOff leaves a job's end for the model to find with job_output.
	WakeOff = "off"
)

// JobsConfig is tools.bash's jobs: key: commands run in the background.
type JobsConfig struct {
	// Enabled adds the background argument to bash and the job_output,
	// job_input, job_kill and job_list tools. Off by default; the
	// workspace-write and full-access presets turn it on.
	Enabled bool `koanf:"enabled" json:"enabled,omitempty"`
	// MaxRunning caps the jobs of one agent running at once; default 8.
	MaxRunning int `koanf:"max_running" json:"max_running,omitempty"`
	// BufferBytes is how much of a job's output is kept for job_output:
	// the latest bytes, in a ring; what falls out of it unread is counted
	// and reported. Default 1 MiB.
	BufferBytes int `koanf:"buffer_bytes" json:"buffer_bytes,omitempty"`
	// Wake is on (default) or off: on, a job that ends while its end is
	// unread is reported to its agent, once the agent is idle, as a
	// message through admission (source kind job).
	Wake string `koanf:"wake" json:"wake,omitempty"`
}

// maxBufferBytes bounds jobs.buffer_bytes: every running job holds its
// buffer in memory.
const maxBufferBytes = 64 << 20

func (c JobsConfig) validate() error {
	if !c.Enabled {
		return nil
	}
	switch {
	case c.MaxRunning < 1:
		return fmt.Errorf("jobs.max_running is %d; set at least 1 (or jobs.enabled: false)", c.MaxRunning)
	case c.BufferBytes < 4096 || c.BufferBytes > maxBufferBytes:
		return fmt.Errorf("jobs.buffer_bytes is %d; set from 4096 to %d", c.BufferBytes, maxBufferBytes)
	case c.Wake != WakeOn && c.Wake != WakeOff:
		return fmt.Errorf("jobs.wake is %q; use %q or %q", c.Wake, WakeOn, WakeOff)
	}
	return nil
}
