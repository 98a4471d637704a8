package permission

import "strings"

// gitKeyKind is what a git setting does with its value.
type gitKeyKind int

const (
	// gitKeyInert: the setting makes git run nothing it would not run
	// anyway.
	gitKeyInert gitKeyKind = iota
	// gitKeyCode: the value is a command git runs (sh -c, or a program's
	// path), judged as code.
	gitKeyCode
	// gitKeyOpaque: the setting makes git load or run something the line
	// does not show (a config file, a template's hooks, the ext::
	// transport), or the policy does not know the setting.
	gitKeyOpaque
)

// gitKey classifies a git setting, key lower-cased. Settings that run a
// program are many and spread over sections (pager.<cmd>,
// remote.<name>.uploadpack, uploadpack.packObjectsHook, include.path), so
// the sections known to run nothing are listed rather than those that
// do: a setting outside them is opaque, not inert, and a git release
// that adds one does not open a way around the rules.
func gitKey(key, val string) (gitKeyKind, string) {
	section, _, _ := strings.Cut(key, ".")
	last := key[strings.LastIndexByte(key, '.')+1:]
	v := strings.TrimSpace(val)
	switch {
	case strings.Contains(key, "ext::") || strings.HasPrefix(strings.ToLower(v), "ext::"):
		return gitKeyOpaque, "the ext:: transport runs the command its URL names"
	case key == "core.hookspath":
		return gitKeyOpaque, "core.hooksPath runs the hook scripts of a directory the policy does not read"
	case section == "include" || section == "includeif":
		return gitKeyOpaque, key + " loads settings from a file the policy does not read"
	case key == "init.templatedir":
		return gitKeyOpaque, "init.templateDir copies hook scripts from a directory the policy does not read into the new repository"
	case section == "protocol" && last == "allow":
		return gitKeyOpaque, key + " lets git use transports such as ext::, which run commands"
	case section == "remote" && last == "vcs":
		return gitKeyOpaque, key + " runs a remote helper program the line does not show"
	case section == "pager":
		if isGitBool(v) {
			return gitKeyInert, ""
		}
		return gitKeyCode, ""
	case section == "submodule" && last == "update":
		if strings.HasPrefix(v, "!") {
			return gitKeyCode, ""
		}
		return gitKeyInert, ""
	case key == "core.gitproxy", key == "uploadpack.packobjectshook", key == "interactive.difffilter",
		key == "imap.tunnel", last == "uploadpack", last == "receivepack":
		return gitKeyCode, ""
	// sendemail.<identity>.smtpServer stands for sendemail.smtpServer once
	// the identity is chosen (sendemail.identity, --identity): a path
	// there is a program send-email runs.
	case section == "sendemail" && last == "smtpserver":
		return gitKeyCode, ""
	case section != key && last == "path" && (section == "man" || section == "browser" || section == "mergetool" || section == "difftool"):
		return gitKeyCode, ""
	}
	for _, suffix := range gitCommandKeys {
		if strings.HasSuffix(key, suffix) {
			return gitKeyCode, ""
		}
	}
	if gitInertSections[section] {
		return gitKeyInert, ""
	}
	return gitKeyOpaque, key + " is not a setting the policy knows to run nothing (settings such as include.path, pager.<command> and remote.<name>.uploadpack make git run programs)"
}

// gitInertSections are the sections whose settings, once those ending in
// a command name above are judged as code, make git run nothing.
var gitInertSections = map[string]bool{
	"user": true, "author": true, "committer": true, "color": true, "advice": true, "column": true,
	"i18n": true, "log": true, "pretty": true, "format": true, "safe": true, "commit": true, "tag": true,
	"pull": true, "push": true, "fetch": true, "rebase": true, "status": true, "branch": true,
	"blame": true, "grep": true, "gc": true, "pack": true, "index": true, "feature": true,
	"checkout": true, "clone": true, "init": true, "am": true, "apply": true, "notes": true,
	"rerere": true, "versionsort": true, "http": true, "transfer": true, "diff": true, "merge": true,
	"difftool": true, "mergetool": true, "credential": true, "core": true, "protocol": true,
	"remote": true, "url": true, "submodule": true, "sendemail": true, "uploadpack": true,
	"interactive": true, "man": true, "web": true, "browser": true, "filter": true, "gpg": true,
	"trailer": true, "hook": true, "maintenance": true, "stash": true, "reset": true, "worktree": true,
	"sequence": true, "ssh": true, "help": true, "describe": true, "fsck": true, "receive": true,
	"repack": true, "lsrefs": true, "splitindex": true, "add": true, "mailinfo": true, "mailmap": true,
}

// isGitBool reports whether v is one of git's boolean words.
func isGitBool(v string) bool {
	switch strings.ToLower(v) {
	case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		return true
	}
	return false
}
