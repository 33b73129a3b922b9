package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// splicer is the source address of the bridge's own connections to a
// server inside the sandbox: the redirection lets connections from it to
// a loopback address through, so they reach that server.
var splicer = netip.MustParseAddr("127.255.255.254")

// redirectTable is the nftables table the bridge makes in the sandbox's
// network namespace.
const redirectTable = "harness_egress"

// installRedirect makes every TCP connection opened in this network
// namespace reach to, the bridge's redirect listener, except those to
// keep (the bridge's own listeners) and the bridge's connections to a
// server in the sandbox (from splicer to a loopback address). A default
// route over the loopback device lets a connection to any address get as
// far as the redirection; nothing else leaves the namespace by it (a
// packet the redirection does not take, UDP for one, is dropped on
// loopback as not local). It needs CAP_NET_ADMIN in the namespace.
func installRedirect(to netip.AddrPort, keep []netip.AddrPort) error {
	if err := addDefaultRoute(); err != nil {
		return fmt.Errorf("default route over loopback: %w", err)
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: redirectTable})
	out := c.AddChain(&nftables.Chain{
		Name: "out", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest,
	})
	tcp := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	for _, k := range keep {
		if !k.Addr().Is4() {
			continue
		}
		a := k.Addr().As4()
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append([]expr.Any{}, tcp...),
			// ip daddr A tcp dport P accept
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(k.Port())},
			accept)})
	}
	s := splicer.As4()
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append([]expr.Any{}, tcp...),
		// ip saddr 127.255.255.254 ip daddr 127.0.0.0/8 accept
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: s[:]},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 0}},
		accept)})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append([]expr.Any{}, tcp...),
		// redirect to :PORT (on 127.0.0.1, the output path's own address)
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(to.Port())},
		&expr.Redir{RegisterProtoMin: 1})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

// addDefaultRoute adds "default dev lo src 127.0.0.1" to the main routing
// table: without a route a connection to an outside address fails before
// any packet is sent, so the redirection never sees it; without the
// source address, such a connection would leave from 0.0.0.0 and the
// answers would not reach it.
func addDefaultRoute() error {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	// nlmsghdr, rtmsg, then the RTA_OIF and RTA_PREFSRC attributes.
	msg := make([]byte, unix.SizeofNlMsghdr+unix.SizeofRtMsg+2*(unix.SizeofRtAttr+4))
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.RTM_NEWROUTE)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	ne.PutUint32(msg[8:], 1) // sequence
	rt := msg[unix.SizeofNlMsghdr:]
	rt[0] = unix.AF_INET
	rt[4] = unix.RT_TABLE_MAIN
	rt[5] = unix.RTPROT_BOOT
	rt[6] = unix.RT_SCOPE_LINK
	rt[7] = unix.RTN_UNICAST
	attr := rt[unix.SizeofRtMsg:]
	ne.PutUint16(attr[0:], unix.SizeofRtAttr+4)
	ne.PutUint16(attr[2:], unix.RTA_OIF)
	ne.PutUint32(attr[4:], uint32(lo.Index))
	attr = attr[unix.SizeofRtAttr+4:]
	ne.PutUint16(attr[0:], unix.SizeofRtAttr+4)
	ne.PutUint16(attr[2:], unix.RTA_PREFSRC)
	copy(attr[4:], []byte{127, 0, 0, 1})
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(ne.Uint32(m.Data)); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
	return errors.New("no answer from the kernel")
}

// originalDst is where a connection the redirection took was going.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var serr error
	if err := raw.Control(func(fd uintptr) {
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", serr)
	}
	// A sockaddr_in: family, port (network order), address.
	b := mreq.Multiaddr
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), nil
}

// redirectedConn carries a connection the redirection took to where it
// was going. One to a loopback address first tries a server in the
// sandbox (from the splicer address, which the redirection lets
// through): a connection between two of the sandbox's own processes
// never leaves it and is not the proxy's. Any other goes to the proxy as
// a tunnel to its original destination, which the proxy allows or
// refuses, and reports, like any other.
func redirectedConn(c net.Conn, socket string, self netip.AddrPort) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return
	}
	dst, err := originalDst(tc)
	if err != nil || dst == self {
		c.Close()
		return
	}
	if dst.Addr().IsLoopback() {
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(splicer, 0)), Timeout: 10 * time.Second}
		if up, err := d.Dial("tcp", dst.String()); err == nil {
			splice(c, up)
			return
		}
	}
	bridgeConn(c, socket, dst.String())
}

// splice copies between two connections until both directions end.
func splice(a, b net.Conn) {
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(b, a)
		closeWrite(b)
		close(done)
	}()
	io.Copy(a, b)
	closeWrite(a)
	<-done
}

// probeRedirect says whether the redirection works in this network
// namespace: it installs it and sends a connection to an outside address
// (TEST-NET-1, never routed) through it.
func probeRedirect() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	to := l.Addr().(*net.TCPAddr).AddrPort()
	if err := installRedirect(to, nil); err != nil {
		return err
	}
	want := netip.MustParseAddrPort("192.0.2.1:9")
	answer := make(chan error, 1)
	go func() {
		c, err := net.DialTimeout("tcp", want.String(), 5*time.Second)
		if err != nil {
			answer <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b := []byte{1}
		if _, err = c.Write(b); err == nil {
			_, err = io.ReadFull(c, b)
		}
		answer <- err
	}()
	l.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	c, err := l.Accept()
	if err != nil {
		return fmt.Errorf("a connection to %s did not reach the redirection: %w", want, err)
	}
	defer c.Close()
	got, err := originalDst(c.(*net.TCPConn))
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("a connection to %s arrived as one to %s", want, got)
	}
	// Both ways: what the bridge sends back reaches the client.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b := []byte{0}
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("a redirected connection: %w", err)
	}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("a redirected connection: %w", err)
	}
	if err := <-answer; err != nil {
		return fmt.Errorf("a redirected connection got no answer: %w", err)
	}
	return nil
}

// probeMain runs the probe and says how it went, for ProbeRedirect.
func probeMain() int {
	if err := probeRedirect(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
