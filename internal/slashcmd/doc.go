// Package slashcmd parses and answers the session slash commands that
// more than one front end offers — /rewind, /redo and /goal — so the
// interactive CLI and the ACP server read the same arguments the same way
// and say the same thing about the result. It holds no state: callers run
// the request against sessions.Service themselves.
package slashcmd
