package entry

import (
	"fmt"
	"syscall"
	"unsafe"
)

const (
	siocGifflags = 0x8913
	siocSifflags = 0x8914
)

// ifreqFlags is struct ifreq with its flags member.
type ifreqFlags struct {
	name  [16]byte
	flags uint16
	_     [22]byte
}

// proxyListener brings loopback up in the new network namespace, listens
// on 127.0.0.1:port there and hands the listener to dsh, which serves it.
func proxyListener(ctl, port int) error {
	s, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("a socket to configure loopback: %w", err)
	}
	var ifr ifreqFlags
	copy(ifr.name[:], "lo")
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), siocGifflags, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		syscall.Close(s)
		return fmt.Errorf("reading loopback's flags: %w", e)
	}
	ifr.flags |= syscall.IFF_UP
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(s), siocSifflags, uintptr(unsafe.Pointer(&ifr))); e != 0 {
		syscall.Close(s)
		return fmt.Errorf("bringing loopback up: %w", e)
	}
	syscall.Close(s)
	l, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the proxy's socket: %w", err)
	}
	defer syscall.Close(l)
	if err := syscall.Bind(l, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("binding the proxy to 127.0.0.1:%d: %w", port, err)
	}
	if err := syscall.Listen(l, syscall.SOMAXCONN); err != nil {
		return fmt.Errorf("listening on 127.0.0.1:%d: %w", port, err)
	}
	if err := syscall.Sendmsg(ctl, []byte{MsgListener}, syscall.UnixRights(l), nil, 0); err != nil {
		return fmt.Errorf("handing the proxy listener to dsh: %w", err)
	}
	return nil
}
