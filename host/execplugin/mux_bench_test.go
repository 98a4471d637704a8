package execplugin_test

import (
	stdctx "context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/internal/hosttest"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkCallPaths sets one plugin call — an admission whose listener
// calls next, so two round trips between host and plugin — against its
// floor in the same run: "tcp-floor" is two ping-pongs of 64 bytes over a
// loopback TCP connection, "grpc-unary" a bare unary RPC (Describe) to the
// plugin, "grpc-stream" two round trips of an empty frame on a bare gRPC
// stream to a plugin process that echoes it from the stream's goroutine
// (the floor of the call on the stream, which makes two), "call-unary" the call on an RPC of its own (a plugin without
// mux), "call-mux" the call on the plugin's Mux stream, and "decide-mux"
// an admission the plugin refuses without next (one round trip) on the
// stream. Each reports its p50, its p50 over the TCP floor's (x-floor),
// and CPU per call in the host and, where there is one, in the plugin
// process; the calls also their p50 and CPU over grpc-stream's.
func BenchmarkCallPaths(b *testing.B) {
	floor := tcpFloor(b, 5000)
	unary := callHost(b, "TESTPLUGIN_NO_MUX")
	muxed := callHost(b, "")
	echo := callHost(b, "TESTPLUGIN_ECHO_MUX")
	b.Run("tcp-floor", func(b *testing.B) {
		conn, stop := tcpEcho(b)
		defer stop()
		measure(b, floor, 0, func() error { return pingPong(conn, 2) })
	})
	b.Run("grpc-unary", func(b *testing.B) {
		p := binary(muxed, "guard")
		rpc := execplugin.RPC(p)
		measure(b, floor, execplugin.PID(p), func() error {
			_, err := rpc.Describe(stdctx.Background(), &pluginv1.DescribeRequest{})
			return err
		})
	})
	var stream2 cost // grpc-stream's, the floor of a call that makes two round trips
	b.Run("grpc-stream", func(b *testing.B) {
		p := binary(echo, "guard")
		ctx, cancel := stdctx.WithCancel(stdctx.Background())
		defer cancel()
		stream, err := execplugin.RPC(p).Mux(ctx)
		if err != nil {
			b.Fatal(err)
		}
		frame := &pluginv1.MuxHostFrame{Id: 1}
		stream2 = measure(b, floor, execplugin.PID(p), func() error {
			for range 2 {
				if err := stream.Send(frame); err != nil {
					return err
				}
				if _, err := stream.Recv(); err != nil {
					return err
				}
			}
			return nil
		})
	})
	for _, c := range []struct {
		name string
		h    *host.Host
	}{{"call-unary", unary}, {"call-mux", muxed}} {
		h := c.h
		b.Run(c.name, func(b *testing.B) {
			p := binary(h, "guard")
			got := measure(b, floor, execplugin.PID(p), func() error { return execplugin.CallAdmission(p, stdctx.Background(), "hi") })
			if stream2.p50 > 0 {
				b.ReportMetric(float64(got.p50)/float64(stream2.p50), "x-grpc-stream")
				b.ReportMetric(got.host/stream2.host, "host-cpu-x-grpc-stream")
				if stream2.plugin > 0 {
					b.ReportMetric(got.plugin/stream2.plugin, "plugin-cpu-x-grpc-stream")
				}
			}
		})
	}
	b.Run("decide-mux", func(b *testing.B) {
		p := binary(muxed, "guard")
		measure(b, floor, execplugin.PID(p), func() error { return execplugin.CallAdmission(p, stdctx.Background(), "spam") })
	})
}

// cost is what measure measured: p50, and CPU µs per call in each process.
type cost struct {
	p50          time.Duration
	host, plugin float64
}

// callHost starts a host whose plugin calls next, with the environment
// variable env set (none when "").
func callHost(b *testing.B, env string) *host.Host {
	bin, _ := binaries(&testing.T{})
	extra := ""
	if env != "" {
		extra = "    env: {" + env + ": \"1\"}\n"
	}
	cfg, err := config.Parse("bench.yaml", []byte(execConfig(bin, "{refuse_word: spam}", extra)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(stdctx.Background()) })
	if _, serving := execplugin.MuxCalls(binary(h, "guard")); serving != (env != "TESTPLUGIN_NO_MUX") {
		b.Fatalf("with %s the plugin's stream serving is %v", env, serving)
	}
	return h
}

// measure runs call b.N times and reports its p50, the p50 over floor, and
// CPU per call: the host's (this process) and the plugin's (pid, unless 0).
func measure(b *testing.B, floor time.Duration, pid int, call func() error) cost {
	lat := make([]time.Duration, 0, 1<<14)
	hostCPU, pluginCPU, pluginSys := testkit.CPUTime(), processCPU(pid), syscalls(pid)
	for b.Loop() {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	n := float64(len(lat))
	var c cost
	c.host = float64((testkit.CPUTime() - hostCPU).Nanoseconds()) / n / 1000
	b.ReportMetric(c.host, "host-cpu-µs/call")
	if pid != 0 {
		c.plugin = float64((processCPU(pid) - pluginCPU).Nanoseconds()) / n / 1000
		b.ReportMetric(c.plugin, "plugin-cpu-µs/call")
		b.ReportMetric(float64(syscalls(pid)-pluginSys)/n, "plugin-rw-syscalls/call")
	}
	c.p50 = median(lat)
	b.ReportMetric(float64(c.p50.Nanoseconds())/1000, "p50-µs")
	b.ReportMetric(float64(c.p50)/float64(floor), "x-floor")
	return c
}

func median(lat []time.Duration) time.Duration {
	slices.Sort(lat)
	return lat[len(lat)/2]
}

// syscalls is how many read and write system calls process pid made so far
// (/proc/<pid>/io's syscr and syscw), a measure of the messages a call
// costs that the machine's load does not disturb.
func syscalls(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		for _, key := range []string{"syscr: ", "syscw: "} {
			if v, ok := strings.CutPrefix(line, key); ok {
				c, _ := strconv.Atoi(v)
				n += c
			}
		}
	}
	return n
}

// tcpFloor is the p50 of two loopback TCP round trips, over n samples.
func tcpFloor(b *testing.B, n int) time.Duration {
	conn, stop := tcpEcho(b)
	defer stop()
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := pingPong(conn, 2); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return median(lat)
}

// tcpEcho connects to a loopback echo server of this process.
func tcpEcho(b *testing.B) (net.Conn, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := lis.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return conn, func() {
		conn.Close()
		lis.Close()
		<-served
	}
}

func pingPong(conn net.Conn, trips int) error {
	var buf [64]byte
	for range trips {
		if _, err := conn.Write(buf[:]); err != nil {
			return err
		}
		if _, err := io.ReadFull(conn, buf[:]); err != nil {
			return err
		}
	}
	return nil
}
