package skills

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/skills/frontmatter"
)

// Codes of the problems a skill folder can have; a skill with one is left
// out and logged, and never fails the agent.
const (
	// Invalid: SKILL.md breaks the format (front matter, name,
	// description, a field's type or length).
	Invalid errs.Code = "SKILL_INVALID"
	// Unreadable: SKILL.md cannot be read, is too large or is not text.
	Unreadable errs.Code = "SKILL_UNREADABLE"
	// Duplicate: a skill of the same name was found earlier in paths.
	Duplicate errs.Code = "SKILL_DUPLICATE"
	// Unknown: the model asked for a skill that is not there.
	Unknown errs.Code = "SKILL_UNKNOWN"
	// ModelDisabled: the skill says disable-model-invocation: true, so
	// in Claude Code only a person runs it, as /name, which dsh does not
	// offer; it is not offered to the model either.
	ModelDisabled errs.Code = "SKILL_MODEL_DISABLED"
)

// MaxFileBytes bounds one SKILL.md: its body goes to the model whole.
const MaxFileBytes = 256 << 10

// Skill is one valid skill folder.
type Skill struct {
	Name          string
	Description   string
	License       string
	Compatibility string
	Metadata      map[string]string
	AllowedTools  []string
	// Dir is the skill's folder, absolute; File its SKILL.md.
	Dir, File string
	// Body is SKILL.md after the front matter.
	Body string
	// Ignored names front matter keys the spec does not define, which
	// dsh reads past (Claude Code adds some of its own).
	Ignored []string
	// Derived names the required fields the file leaves out and dsh
	// filled in as Claude Code does (name, description).
	Derived []string
	// modelDisabled is disable-model-invocation: true, with its line.
	modelDisabled int
}

// changing are the front matter keys of Claude Code's skills that change
// what a skill does there and that dsh does not apply: a skill that has
// one runs differently, so they are logged as a warning, not a note.
var changing = map[string]string{
	"model":   "the turn keeps the agent's model",
	"context": "the skill runs in the agent's own turn, not in a forked subagent",
	"agent":   "the skill runs in the agent's own turn, not in a subagent",
	"hooks":   "its hooks do not run; put them in a hooks.command file",
	"effort":  "the turn keeps the agent's settings",
}

// Problem is a skill left out, and why.
type Problem struct {
	File string
	Err  error
}

// specFields are the front matter keys of the Agent Skills
// specification.
var specFields = map[string]bool{"name": true, "description": true, "license": true, "compatibility": true, "metadata": true, "allowed-tools": true}

// cache keeps each SKILL.md as last parsed, keyed by path and checked by
// size and modification time, so a turn's scan reads only what changed.
type cache struct {
	mu sync.Mutex
	m  map[string]cached
}

type cached struct {
	mod  time.Time
	size int64
	s    Skill
	err  error
}

// load is load(file) through the cache, fi the file's stat (nil when it
// failed); a nil cache always reads.
func (c *cache) load(file string, fi fs.FileInfo) (Skill, error) {
	if c == nil || fi == nil {
		return load(file) // reports a stat error in the file's words
	}
	c.mu.Lock()
	hit, ok := c.m[file]
	c.mu.Unlock()
	if ok && hit.mod.Equal(fi.ModTime()) && hit.size == fi.Size() {
		return hit.s, hit.err
	}
	s, err := load(file)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]cached{}
	}
	c.m[file] = cached{mod: fi.ModTime(), size: fi.Size(), s: s, err: err}
	c.mu.Unlock()
	return s, err
}

// scan reads every <dir>/<name>/SKILL.md of dirs, in order; a name found
// again later is a Duplicate problem, so the earlier directory wins.
func scan(dirs []string) ([]Skill, []Problem) { return (*cache)(nil).scan(dirs) }

func (c *cache) scan(dirs []string) ([]Skill, []Problem) {
	var out []Skill
	var problems []Problem
	seen := map[string]string{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the common case: no skills there
		}
		if err != nil {
			// A folder that is there but cannot be listed is said, not
			// taken for an empty one.
			problems = append(problems, Problem{File: dir, Err: errs.New(Unreadable, fmt.Sprintf("%s: the skills folder cannot be listed: %v", dir, err)).WithReason("skills/unreadable")})
			continue
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			// A linked skill folder is common (one checkout, several
			// agents): a symlink is followed like a folder.
			if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
				continue
			}
			file := filepath.Join(dir, e.Name(), "SKILL.md")
			fi, err := os.Stat(file)
			if err != nil && errors.Is(err, fs.ErrNotExist) || err == nil && fi.IsDir() {
				continue // not a skill folder
			}
			s, err := c.load(file, fi)
			if err != nil {
				problems = append(problems, Problem{File: file, Err: err})
				continue
			}
			if first, dup := seen[s.Name]; dup {
				problems = append(problems, Problem{File: file, Err: errs.New(Duplicate, fmt.Sprintf(
					"%s: skill %q is already loaded from %s, which comes earlier in paths; rename one of them", file, s.Name, first)).WithReason("skills/duplicate")})
				continue
			}
			seen[s.Name] = file
			if s.modelDisabled > 0 {
				// Still shadows a later skill of its name, as in Claude Code.
				problems = append(problems, Problem{File: file, Err: errs.New(ModelDisabled, fmt.Sprintf(
					"%s:%d: disable-model-invocation: true keeps the skill from the model, as in Claude Code, where only a person runs it as /%s; dsh does not run skills as /name, so it is not offered at all. Remove the field to offer it to the model, or make it a command file (.claude/commands/%s.md) to run it by name",
					file, s.modelDisabled, s.Name, s.Name)).WithReason("skills/model-disabled")})
				continue
			}
			out = append(out, s)
		}
	}
	return out, problems
}

// load reads and validates one SKILL.md as the specification says.
func load(file string) (Skill, error) {
	f, err := os.Open(file)
	if err != nil {
		return Skill{}, errs.New(Unreadable, fmt.Sprintf("%s: cannot be read: %v", file, err)).WithReason("skills/unreadable")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Skill{}, errs.New(Unreadable, fmt.Sprintf("%s: cannot be read: %v", file, err)).WithReason("skills/unreadable")
	}
	if len(data) > MaxFileBytes {
		return Skill{}, errs.New(Unreadable, fmt.Sprintf("%s: larger than %d bytes; move detail into files beside it (references/), as the format recommends", file, MaxFileBytes)).WithReason("skills/too-large")
	}
	if !utf8.Valid(data) || strings.IndexByte(string(data), 0) >= 0 {
		return Skill{}, errs.New(Unreadable, fmt.Sprintf("%s: not UTF-8 text", file)).WithReason("skills/binary")
	}
	d, err := frontmatter.Parse(file, data, true)
	if err != nil {
		return Skill{}, invalid(err)
	}
	s := Skill{Dir: filepath.Dir(file), File: file, Body: strings.TrimSpace(d.Body)}
	var present bool
	// The specification requires name and description; Claude Code,
	// whose .claude/skills dsh reads, takes the folder's name and the
	// body's first paragraph for a missing one, so such a skill loads
	// here too (noted in the log).
	if s.Name, present, err = d.String("name"); err != nil {
		return Skill{}, invalid(err)
	} else if !present {
		s.Name = filepath.Base(s.Dir)
		if err := checkName(s.Name, s.Name); err != nil {
			return Skill{}, invalid(frontmatter.Errorf(file, 1, "name is missing and the folder's name cannot stand for it: %v; add \"name: ...\" and rename the folder to match", err))
		}
		s.Derived = append(s.Derived, "name from its folder")
	} else {
		nameNode, _ := d.Field("name")
		if err := checkName(s.Name, filepath.Base(s.Dir)); err != nil {
			return Skill{}, invalid(frontmatter.Errorf(file, d.Line(nameNode), "%v", err))
		}
	}
	descLine := 1
	if s.Description, present, err = d.String("description"); err != nil {
		return Skill{}, invalid(err)
	} else if !present {
		s.Description = firstParagraph(s.Body)
		if s.Description == "" {
			return Skill{}, invalid(frontmatter.Errorf(file, 1, "the required field description is missing and the body has no paragraph to take it from; say what the skill does and when to use it, in at most 1024 characters"))
		}
		if r := []rune(s.Description); len(r) > 1024 {
			s.Description = string(r[:1023]) + "…"
		}
		s.Derived = append(s.Derived, "description from the body's first paragraph")
	} else {
		descNode, _ := d.Field("description")
		descLine = d.Line(descNode)
	}
	switch n := utf8.RuneCountInString(s.Description); {
	case strings.TrimSpace(s.Description) == "":
		return Skill{}, invalid(frontmatter.Errorf(file, descLine, "description is empty; say what the skill does and when to use it"))
	case n > 1024:
		return Skill{}, invalid(frontmatter.Errorf(file, descLine, "description is %d characters; the limit is 1024", n))
	}
	if s.License, _, err = d.String("license"); err != nil {
		return Skill{}, invalid(err)
	}
	if c, present, err := d.String("compatibility"); err != nil {
		return Skill{}, invalid(err)
	} else if present {
		n, _ := d.Field("compatibility")
		if l := utf8.RuneCountInString(c); l < 1 || l > 500 {
			return Skill{}, invalid(frontmatter.Errorf(file, d.Line(n), "compatibility is %d characters; give 1 to 500, or leave the field out", l))
		}
		s.Compatibility = c
	}
	if s.Metadata, err = d.StringMap("metadata"); err != nil {
		return Skill{}, invalid(err)
	}
	if s.AllowedTools, err = d.Strings("allowed-tools"); err != nil {
		return Skill{}, invalid(err)
	}
	for _, k := range d.Keys() {
		if !specFields[k.Name] {
			s.Ignored = append(s.Ignored, k.Name)
		}
	}
	if v, ok := d.Field("disable-model-invocation"); ok && v.Value == "true" {
		s.modelDisabled = d.Line(v)
	}
	return s, nil
}

// firstParagraph is the body's first paragraph on one line, headings
// passed over: what Claude Code takes for a missing description.
func firstParagraph(body string) string {
	var words []string
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			if len(words) > 0 {
				break
			}
			continue
		}
		if line == "" {
			if len(words) > 0 {
				break
			}
			continue
		}
		words = append(words, line)
	}
	return strings.Join(words, " ")
}

// invalid recodes a front matter error as the skill's, keeping its
// message (file, line, fix).
func invalid(err error) error {
	msg := err.Error()
	var e *errs.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	return errs.New(Invalid, msg).WithReason("skills/invalid")
}

// checkName applies the specification's rules for name.
func checkName(name, dir string) error {
	if n := utf8.RuneCountInString(name); n < 1 || n > 64 {
		return fmt.Errorf("name %q is %d characters; give 1 to 64", name, n)
	}
	for _, r := range name {
		if r != '-' && !unicode.IsDigit(r) && !(unicode.IsLetter(r) && unicode.IsLower(r)) {
			return fmt.Errorf("name %q has %q; use lowercase letters, digits and hyphens only", name, r)
		}
	}
	if strings.HasPrefix(name, "-") || strings.HasSuffix(name, "-") {
		return fmt.Errorf("name %q starts or ends with a hyphen", name)
	}
	if strings.Contains(name, "--") {
		return fmt.Errorf("name %q has two hyphens in a row", name)
	}
	if name != dir {
		return fmt.Errorf("name %q does not match its folder %q; the specification requires them to be equal", name, dir)
	}
	return nil
}
