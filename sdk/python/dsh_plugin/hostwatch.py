"""The child's side of dsh's host pipe (see internal/childproc).

dsh gives each child the read end of a pipe whose only write end it
holds, named by DSH_HOST_FD. The pipe reads end-of-file the moment dsh is
gone, even when dsh was SIGKILLed; the plugin then kills its own process
group, which takes whatever it started with it.

A thread of the plugin is not enough: when dsh dies, the kernel SIGKILLs
dsh's direct child at once (its parent-death signal), before any of its
threads runs, and what the plugin started would outlive it. So a tiny
/bin/sh in the plugin's group watches the pipe too and kills the group;
the parent-death signal does not reach it.
"""

import os
import signal
import stat
import subprocess
import threading

#: Reads the pipe until end-of-file, then kills its own process group.
_HELPER = 'read -r _ <&%d; kill -KILL 0'

HOST_FD_ENV = "DSH_HOST_FD"


def kill_own_group():
    """End the calling process's group, the caller included."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


def watch_host(gone=kill_own_group, environ=None, helper=True):
    """Run gone on a daemon thread once dsh is gone; report whether watching.

    Started by hand (no DSH_HOST_FD, or a descriptor that is not a pipe),
    it does nothing and returns False. Python already ignores SIGPIPE, so a
    write to a dead host's stderr fails with an error instead of ending
    the process before the watcher runs.
    """
    env = os.environ if environ is None else environ
    try:
        fd = int(env.get(HOST_FD_ENV, ""))
    except ValueError:
        return False
    if fd < 3:
        return False
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False  # not the pipe dsh passed; leave it alone
    except OSError:
        return False

    def wait():
        while True:
            try:
                # dsh never writes: any return means every write end closed.
                os.read(fd, 1)
                break
            except InterruptedError:
                continue
            except OSError:
                break
        gone()

    threading.Thread(target=wait, name="dsh-host-watch", daemon=True).start()
    if helper:
        # No stdio: the host reads the plugin's stdout and stderr to their
        # end, which must come when the plugin exits.
        subprocess.Popen(["/bin/sh", "-c", _HELPER % fd], pass_fds=(fd,), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return True
