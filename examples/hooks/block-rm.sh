#!/bin/sh
# A PreToolUse hook: refuses bash commands that remove files recursively.
# It reads the event from stdin; exit code 2 blocks the call and what it
# writes on stderr is the reason the model reads.
input=$(cat)
if printf '%s' "$input" | grep -Eq '"command": ?"[^"]*rm +-[a-zA-Z]*[rR]'; then
	echo "recursive rm is blocked by examples/hooks/block-rm.sh; delete files one by one with the edit tools" >&2
	exit 2
fi
exit 0
