package attachments

// Limits cap what one delivery may store. Zero fields take the defaults.
type Limits struct {
	// PerPart is the most bytes one part may hold.
	PerPart int64 `koanf:"max_part_bytes" json:"max_part_bytes,omitempty"`
	// PerMessage is the most bytes all parts of one message may hold.
	PerMessage int64 `koanf:"max_message_bytes" json:"max_message_bytes,omitempty"`
	// Parts is the most parts one message may carry, text parts
	// included: each stored part costs a file, a marker and their syncs,
	// however small it is.
	Parts int `koanf:"max_parts" json:"max_parts,omitempty"`
	// Store is the most bytes the store's blobs may hold together. A part
	// whose bytes are not stored yet and would pass it is refused; bytes
	// already stored (sent before, by any session) always pass.
	Store int64 `koanf:"max_store_bytes" json:"max_store_bytes,omitempty"`
}

// Default limits: a screenshot or a PDF fits; a video does not. The
// providers' own caps are near these (Anthropic: 5 MB per image after
// their resize, 32 MB per request).
const (
	DefaultPerPart    = 10 << 20
	DefaultPerMessage = 20 << 20
	DefaultParts      = 32
	DefaultStore      = 4 << 30
)

func (l Limits) withDefaults() Limits {
	if l.PerPart <= 0 {
		l.PerPart = DefaultPerPart
	}
	if l.PerMessage <= 0 {
		l.PerMessage = DefaultPerMessage
	}
	if l.Parts <= 0 {
		l.Parts = DefaultParts
	}
	if l.Store <= 0 {
		l.Store = DefaultStore
	}
	return l
}
