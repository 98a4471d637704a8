package openai

import (
	"encoding/json"
	"unicode/utf8"
)

// Most chunks of a stream carry one piece of text or reasoning and nothing
// else. fastDelta parses exactly that shape without encoding/json's
// reflection. It declines — and the full decoder runs — on anything else:
// tool calls, a finish, usage, an error, several choices, nested values it
// would have to skip, keys encoding/json would match case-insensitively,
// strings it cannot take as they are. A differential fuzz test holds it to
// the full decoder's answers.
// fastPath lets BenchmarkStreamEndToEnd measure with and without it.
var fastPath = true

func fastDelta(data []byte) (content, reasoning string, ok bool) {
	p := parser{b: data}
	if !p.object(levelChunk) {
		return "", "", false
	}
	p.ws()
	if p.i != len(p.b) {
		return "", "", false
	}
	r := p.d.reasoningContent
	if r == "" {
		r = p.d.reasoning
	}
	return p.d.content, r, true
}

// The objects fastDelta knows; field dispatches on them. (A switch rather
// than callbacks: closures passed down would allocate on every chunk.)
const (
	levelChunk = iota
	levelChoice
	levelDelta
)

// field parses the value of key inside an object of the given level.
func (p *parser) field(level int, key []byte) bool {
	switch level {
	case levelChunk:
		switch string(key) {
		case "choices":
			return p.choices()
		case "usage":
			return p.null()
		}
		return !declined(key, "choices", "usage", "error") && p.scalar()
	case levelChoice:
		switch string(key) {
		case "index":
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == '0' {
				p.i++
				p.index = true
				return p.i == len(p.b) || !isNumberByte(p.b[p.i])
			}
			return false
		case "delta":
			return p.object(levelDelta)
		case "finish_reason", "logprobs":
			return p.null()
		}
		return !declined(key, "index", "delta", "finish_reason", "logprobs") && p.scalar()
	}
	var ok bool
	switch string(key) {
	case "content":
		p.d.content, ok = p.strOrNull()
	case "reasoning_content":
		p.d.reasoningContent, ok = p.strOrNull()
	case "reasoning":
		p.d.reasoning, ok = p.strOrNull()
	case "role":
		_, ok = p.strOrNull()
	}
	return ok // any other delta key, tool_calls included, declines
}

type delta struct{ content, reasoningContent, reasoning string }

// declined reports whether key differs from one of names only by case,
// which encoding/json would still match.
func declined(key []byte, names ...string) bool {
	for _, n := range names {
		if len(key) == len(n) && foldEqual(key, n) {
			return true
		}
	}
	return false
}

// foldEqual compares ASCII case-insensitively. encoding/json also folds
// some non-ASCII letters onto ASCII ones (the Kelvin sign onto k), so any
// non-ASCII byte counts as a match and the chunk declines.
func foldEqual(key []byte, name string) bool {
	for i := range len(key) {
		a, b := key[i], name[i]
		if a >= 0x80 {
			return true
		}
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

type parser struct {
	b     []byte
	i     int
	d     delta
	index bool
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object parses {"key": value, ...} at level.
func (p *parser) object(level int) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	for {
		p.ws()
		key, ok := p.key()
		if !ok || !p.eat(':') || !p.field(level, key) {
			return false
		}
		if p.eat('}') {
			return true
		}
		if !p.eat(',') {
			return false
		}
	}
}

// choices parses an array of exactly one choice with index 0. A repeated
// "choices" key decodes into the same choice, as encoding/json does.
func (p *parser) choices() bool {
	if !p.eat('[') {
		return false
	}
	p.index = false
	return p.object(levelChoice) && p.index && p.eat(']')
}

func (p *parser) null() bool {
	p.ws()
	return p.literal("null")
}

func (p *parser) literal(lit string) bool {
	if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

// key reads an object key without copying it; keys with escapes decline.
func (p *parser) key() ([]byte, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			k := p.b[p.i+1 : j]
			p.i = j + 1
			return k, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

func (p *parser) strOrNull() (string, bool) {
	if p.null() {
		return "", true
	}
	p.ws()
	return p.str()
}

// str reads a JSON string. Strings with escapes go through encoding/json so
// they decode exactly as the full decoder would; invalid UTF-8 declines,
// since encoding/json would rewrite it.
func (p *parser) str() (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	start := p.i
	escaped := false
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '\\':
			escaped = true
			j++
		case c == '"':
			p.i = j + 1
			raw := p.b[start+1 : j]
			if !escaped {
				if !utf8.Valid(raw) {
					return "", false
				}
				return string(raw), true
			}
			var s string
			if json.Unmarshal(p.b[start:j+1], &s) != nil {
				return "", false
			}
			return s, true
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// skipString passes over a string value, checking it as encoding/json
// would, without copying it.
func (p *parser) skipString() bool {
	start := p.i
	escaped := false
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '\\':
			escaped = true
			j++
		case c == '"':
			p.i = j + 1
			if escaped {
				return json.Valid(p.b[start:p.i])
			}
			return true // invalid UTF-8 is replaced, not rejected, by encoding/json
		case c < 0x20:
			return false
		}
	}
	return false
}

// scalar skips a string, number, true, false or null; nested values
// decline.
func (p *parser) scalar() bool {
	p.ws()
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		return p.skipString()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return p.literal("true") || p.literal("false") || p.literal("null")
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() bool {
	b, i := p.b, p.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	p.i = i
	return true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'
}
