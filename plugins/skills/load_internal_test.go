package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
)

// TestLoadAppliesTheSpecification: each rule of the specification is
// refused with the file, the line of the field and a fix.
func TestLoadAppliesTheSpecification(t *testing.T) {
	long := strings.Repeat("x", 1025)
	cases := []struct{ dir, text, want string }{
		{"pdf", "name: PDF\ndescription: d", ":2: name \"PDF\" has 'P'"},
		{"-pdf", "name: -pdf\ndescription: d", ":2: name \"-pdf\" starts or ends with a hyphen"},
		{"pdf--x", "name: pdf--x\ndescription: d", ":2: name \"pdf--x\" has two hyphens in a row"},
		{"pdf", "name: other\ndescription: d", "does not match its folder \"pdf\""},
		{"PDF Tools", "description: d", ":1: name is missing and the folder's name cannot stand for it: name \"PDF Tools\" has 'P'"},
		{"pdf", "name: pdf\ndescription: \"  \"", ":3: description is empty"},
		{"pdf", "name: pdf\ndescription: " + long, ":3: description is 1025 characters; the limit is 1024"},
		{"pdf", "name: pdf\ndescription: d\ncompatibility: \"\"", ":4: compatibility is 0 characters"},
		{"pdf", "name: pdf\ndescription: d\nmetadata:\n  a: [1]", ":5: metadata.a must be a text value"},
		{"pdf", "name: pdf\ndescription: [a]", ":3: description must be a text value"},
		{"pdf", "name: pdf\ndescription: [d\n  - e", "SKILL.md:2: the front matter is not valid YAML: did not find expected"},
		{"pdf", "name: pdf\ndescription: d\nallowed-tools: {a: b}", ":4: allowed-tools must be a text value or a list of them"},
	}
	for _, c := range cases {
		file := filepath.Join(t.TempDir(), c.dir, "SKILL.md")
		os.MkdirAll(filepath.Dir(file), 0o755)
		os.WriteFile(file, []byte("---\n"+c.text+"\n---\nbody\n"), 0o644)
		_, err := load(file)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "SKILL_INVALID (skills/invalid): "+file+":") || !errs.HasCode(err, Invalid) {
			t.Errorf("%q: got %v, want %s…%s", c.text, err, file, c.want)
		}
	}
	file := filepath.Join(t.TempDir(), "pdf", "SKILL.md")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("no front matter\n"), 0o644)
	if _, err := load(file); err == nil || !strings.Contains(err.Error(), file+":1: the file does not start with a front matter block") {
		t.Errorf("no front matter: %v", err)
	}
}

// TestLoadReadsTheOptionalFields: the specification's example with its
// optional fields, and allowed-tools in both its forms.
func TestLoadReadsTheOptionalFields(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pdf-processing", "SKILL.md")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("---\nname: pdf-processing\ndescription: Extract PDF text, fill forms, merge files. Use when handling PDFs.\nlicense: Apache-2.0\nmetadata:\n  author: example-org\n  version: \"1.0\"\nallowed-tools: Bash(git:*) Bash(jq:*) Read\nuser-invocable: false\n---\n\n# Body\n"), 0o644)
	s, err := load(file)
	if err != nil {
		t.Fatal(err)
	}
	if s.License != "Apache-2.0" || s.Metadata["version"] != "1.0" || s.Metadata["author"] != "example-org" ||
		strings.Join(s.AllowedTools, "|") != "Bash(git:*)|Bash(jq:*)|Read" || s.Body != "# Body" || strings.Join(s.Ignored, ",") != "user-invocable" {
		t.Fatalf("%+v", s)
	}
}

// TestMissingNameAndDescriptionAreTakenAsClaudeCodeTakesThem: the
// specification requires both, Claude Code does not: it takes the
// folder's name and the body's first paragraph. A skill written for it
// loads here too, saying which it derived; a body with no paragraph
// still leaves the skill out.
func TestMissingNameAndDescriptionAreTakenAsClaudeCodeTakesThem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "release-notes", "SKILL.md")
	os.MkdirAll(filepath.Dir(file), 0o755)
	os.WriteFile(file, []byte("---\nallowed-tools: Read\n---\n\n# Release notes\n\nWrite the release notes\nfrom the merged changes.\n\nThen stop.\n"), 0o644)
	s, err := load(file)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "release-notes" || s.Description != "Write the release notes from the merged changes." || len(s.Derived) != 2 {
		t.Fatalf("%+v", s)
	}
	os.WriteFile(file, []byte("---\nname: release-notes\n---\n\nWrite the release notes\nfrom the merged changes.\n\nThen stop.\n"), 0o644)
	if s, err = load(file); err != nil || s.Description != "Write the release notes from the merged changes." {
		t.Fatalf("%+v, %v", s, err)
	}
	os.WriteFile(file, []byte("---\nname: release-notes\n---\n"), 0o644)
	if _, err := load(file); err == nil || !strings.Contains(err.Error(), "the body has no paragraph to take it from") {
		t.Fatalf("no body: %v", err)
	}
}
