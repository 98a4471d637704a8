//go:build unix

package hostwatch

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a plugin started by dsh: it
// watches the host pipe, starts a grandchild, prints its pid and waits.
const helperEnv = "HOSTWATCH_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		if !Watch(KillOwnGroup) {
			fmt.Println("no host pipe")
			os.Exit(2)
		}
		sleep := exec.Command("sleep", "300")
		if err := sleep.Start(); err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		fmt.Println(sleep.Process.Pid)
		select {}
	}
	os.Exit(m.Run())
}

// TestTheGroupEndsWithTheHost: once every write end of the host pipe is
// closed (dsh is gone, however it died), the plugin and what it started
// are killed.
func TestTheGroupEndsWithTheHost(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", HostFDEnv+"=3")
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // as dsh starts a plugin
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper printed no pid: %v", err)
	}
	grandchild, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatalf("the helper said %q", line)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
		t.Fatal("the helper exited while the host was still there")
	case <-time.After(200 * time.Millisecond):
	}
	w.Close() // the host is gone
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not notice the host was gone")
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(grandchild, 0) == nil || !errors.Is(syscall.Kill(grandchild, 0), syscall.ESRCH) {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin's own child %d outlived the host", grandchild)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoHostPipe: started by hand, or with a variable that names no pipe,
// the plugin watches nothing and keeps the descriptor untouched.
func TestNoHostPipe(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "not-a-pipe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, v := range []string{"", "x", "1", strconv.Itoa(int(f.Fd()))} {
		t.Setenv(HostFDEnv, v)
		if Watch(func() { t.Error("gone ran without a host pipe") }) {
			t.Fatalf("%s=%q: Watch reported a host pipe", HostFDEnv, v)
		}
	}
	// An *os.File made for a descriptor closes it when collected.
	runtime.GC()
	runtime.GC()
	if _, err := f.Stat(); err != nil {
		t.Fatalf("Watch closed a descriptor that was not the host pipe: %v", err)
	}
}
