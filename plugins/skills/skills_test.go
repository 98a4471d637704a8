package skills_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/skills"
	"github.com/dsh-go/dsh/services/llm"
)

// TestQuickstartSkillWorksUnchanged: the skill of the format's own
// quickstart, copied unchanged into .agents/skills, is listed by name and
// description (not body) in the system prompt, and the skill tool hands the
// model its body and folder.
func TestQuickstartSkillWorksUnchanged(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	copyDir(t, "testdata/agentskills-quickstart", filepath.Join(ws, ".agents", "skills"))
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: skills.ToolName, Arguments: `{"name":"roll-dice"}`}}},
		{Text: "rolled"},
	})
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	a := e.create("main", ws)
	reqs := e.turn(a, "Roll a d20")
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	sys := reqs[0].System
	dir := filepath.Join(ws, ".agents", "skills", "roll-dice")
	for _, want := range []string{"<name>roll-dice</name>", "<description>Roll dice using a random number generator. Use when asked to roll a die (d6, d20, etc.), roll dice, or generate a random dice roll.</description>", "<location>" + dir + "</location>", "You are a test agent."} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}
	if strings.Contains(sys, "RANDOM") {
		t.Errorf("the body is in the system prompt before the skill is used:\n%s", sys)
	}
	if !hasTool(reqs[0], skills.ToolName) {
		t.Errorf("the model was not offered the %s tool", skills.ToolName)
	}
	res, ok := reqs[1].History.Last()
	if !ok || res.Role != llm.RoleTool || res.IsError {
		t.Fatalf("the second request does not end with the tool's result: %+v", res)
	}
	for _, want := range []string{"echo $((RANDOM % <sides> + 1))", "Replace `<sides>`", "Its folder is " + dir} {
		if !strings.Contains(res.Content, want) {
			t.Errorf("the skill's result lacks %q:\n%s", want, res.Content)
		}
	}
	if strings.Contains(res.Content, "description:") {
		t.Errorf("the front matter reached the model with the body:\n%s", res.Content)
	}
}

// TestUnknownSkillIsAnErrorListingTheSkills: a name the folders do not
// hold comes back to the model as an error naming what is there.
func TestUnknownSkillIsAnErrorListingTheSkills(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	copyDir(t, "testdata/agentskills-quickstart", filepath.Join(ws, ".claude", "skills"))
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: skills.ToolName, Arguments: `{"name":"flip-coin"}`}}},
		{Text: "ok"},
	})
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	reqs := e.turn(e.create("main", ws), "flip a coin")
	res, _ := reqs[len(reqs)-1].History.Last()
	if !res.IsError || !strings.Contains(res.Content, `no skill is named "flip-coin"`) || !strings.Contains(res.Content, "roll-dice") {
		t.Fatalf("result: %+v", res)
	}
}

// TestInAPresetOnlyThatAgentSeesSkills: mounted in one agent's scope, as a
// preset mounts it, the list and the tool reach that agent only.
func TestInAPresetOnlyThatAgentSeesSkills(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	copyDir(t, "testdata/agentskills-quickstart", filepath.Join(ws, ".agents", "skills"))
	e := newEnv(t, nil)
	a := e.create("a", ws)
	b := e.create("b", ws)
	e.apply(a.Context(), skills.Plugin, skills.Config{}.Defaults())
	ra := e.turn(a, "hi")[0]
	rb := e.turn(b, "hi")[0]
	if !strings.Contains(ra.System, "roll-dice") || !hasTool(ra, skills.ToolName) {
		t.Errorf("agent a, whose scope mounts the plugin, lacks the skills:\n%s", ra.System)
	}
	if strings.Contains(rb.System, "roll-dice") || hasTool(rb, skills.ToolName) {
		t.Errorf("agent b sees agent a's skills:\n%s", rb.System)
	}
}

// TestSkillsChangeAtTheNextTurn: a skill added, or made invalid, between
// turns shows in the next turn's prompt; an invalid one is logged with its
// file and line.
func TestSkillsChangeAtTheNextTurn(t *testing.T) {
	ws := t.TempDir()
	home := t.TempDir()
	t.Setenv("HOME", home)
	e := newEnv(t, nil)
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	a := e.create("main", ws)
	if r := e.turn(a, "hi")[0]; strings.Contains(r.System, "available_skills") || hasTool(r, skills.ToolName) {
		t.Fatalf("a section or a tool with no skills:\n%s", r.System)
	}
	user := filepath.Join(home, ".claude", "skills", "pdf-tools", "SKILL.md")
	write(t, user, "---\nname: pdf-tools\ndescription: Fill & merge <PDF> forms.\n---\nUse pdftk.\n")
	r := e.turn(a, "hi")[0]
	if !strings.Contains(r.System, "<description>Fill &amp; merge &lt;PDF&gt; forms.</description>") || !hasTool(r, skills.ToolName) {
		t.Fatalf("the user's new skill is not listed, escaped, with the tool:\n%s", r.System)
	}
	write(t, user, "---\nname: pdf-tools\ndescription: Fill forms.\nmetadata: [a, b]\n---\nUse pdftk.\n")
	if r := e.turn(a, "hi")[0]; strings.Contains(r.System, "pdf-tools") || hasTool(r, skills.ToolName) {
		t.Fatalf("an invalid skill is listed, or the tool stayed:\n%s", r.System)
	}
	if l := e.logged(); !strings.Contains(l, user+":4: metadata must be a mapping") || !strings.Contains(l, "SKILL_INVALID") {
		t.Fatalf("the log does not name the file, line and code:\n%s", l)
	}
}

// TestProjectSkillShadowsTheUsersOfTheSameName: paths are in precedence
// order, and the later duplicate is reported.
func TestProjectSkillShadowsTheUsersOfTheSameName(t *testing.T) {
	ws := t.TempDir()
	home := t.TempDir()
	t.Setenv("HOME", home)
	write(t, filepath.Join(ws, ".claude/skills/deploy/SKILL.md"), "---\nname: deploy\ndescription: Project deploy.\n---\nproject\n")
	write(t, filepath.Join(home, ".claude/skills/deploy/SKILL.md"), "---\nname: deploy\ndescription: User deploy.\n---\nuser\n")
	e := newEnv(t, nil)
	e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	sys := e.turn(e.create("main", ws), "hi")[0].System
	if !strings.Contains(sys, "Project deploy.") || strings.Contains(sys, "User deploy.") {
		t.Fatalf("prompt:\n%s", sys)
	}
	if !strings.Contains(e.logged(), "SKILL_DUPLICATE") {
		t.Fatalf("the shadowed skill is not reported:\n%s", e.logged())
	}
	_ = os.Remove
}

// TestTwoEntriesCombine: a second entry (a plugin bundle's folder) adds
// its skills to the same list and the same skill tool; the first entry's
// skill of a shared name wins; unloading the first leaves the second's.
func TestTwoEntriesCombine(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("HOME", t.TempDir())
	copyDir(t, "testdata/agentskills-quickstart", filepath.Join(ws, ".agents", "skills"))
	bundle := t.TempDir()
	write(t, filepath.Join(bundle, "skills", "deploy", "SKILL.md"), "---\nname: deploy\ndescription: Deploy the app.\n---\nRun make deploy.\n")
	write(t, filepath.Join(bundle, "skills", "roll-dice", "SKILL.md"), "---\nname: roll-dice\ndescription: The bundle's dice.\n---\nloaded dice\n")
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: skills.ToolName, Arguments: `{"name":"deploy"}`}}},
		{Text: "ok"},
	})
	first := e.apply(e.root, skills.Plugin, skills.Config{}.Defaults())
	e.apply(e.root, skills.Plugin, skills.Config{Paths: []string{filepath.Join(bundle, "skills")}})
	a := e.create("main", ws)
	reqs := e.turn(a, "deploy it")
	sys := reqs[0].System
	if strings.Count(sys, "<available_skills>") != 1 || !strings.Contains(sys, "<name>deploy</name>") || !strings.Contains(sys, "Roll dice using") || strings.Contains(sys, "The bundle's dice.") {
		t.Fatalf("prompt:\n%s", sys)
	}
	if res, _ := reqs[1].History.Last(); res.IsError || !strings.Contains(res.Content, "Run make deploy.") {
		t.Fatalf("the bundle's skill: %+v", res)
	}
	if err := first.Dispose(t.Context()); err != nil {
		t.Fatal(err)
	}
	sys = e.turn(a, "again")[0].System
	if !strings.Contains(sys, "The bundle's dice.") || strings.Contains(sys, "Roll dice using") || !hasTool(e.turn(a, "x")[0], skills.ToolName) {
		t.Fatalf("after the first entry left:\n%s", sys)
	}
}
