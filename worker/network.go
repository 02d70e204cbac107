package worker

import (
	"encoding/binary"
	"fmt"
	"net"
)

// NewIP returns an Assigner whose worker ID is the low 16 bits of ip, or,
// when ip is nil, of the first private IPv4 address of this machine
// (10/8, 172.16/12, 192.168/16, 169.254/16) — Sonyflake's default machine
// ID (sony/sonyflake v2, lower16BitPrivateIP).
//
// Collision risk: two machines whose addresses agree in their low 16 bits
// (10.0.1.5 and 10.1.1.5) get the same ID, as do two processes on one
// machine, and a layout narrower than 16 bits rejects most addresses with a
// *RangeError. Safe only inside one /16 with one generator per address; use
// etcd, ZooKeeper or SQL otherwise.
func NewIP(ip net.IP, opts ...Option) (Assigner, error) {
	if ip == nil {
		var err error
		if ip, err = privateIPv4(); err != nil {
			return nil, err
		}
	}
	v4 := ip.To4()
	if v4 == nil {
		return nil, fmt.Errorf("%w: ip %q is not an IPv4 address", ErrBadURL, ip)
	}
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	id := int64(binary.BigEndian.Uint16(v4[2:]))
	return &fixed{s: s, id: id, source: "ip " + v4.String()}, nil
}

// NewMAC returns an Assigner whose worker ID is the 48-bit hardware address
// mac, or, when mac is nil, that of the first up, non-loopback interface
// that has one — the node field of a 128-bit flake (Boundary flake).
//
// Collision risk: MACs are unique only when burned in; containers, VMs and
// cloud instances often share or randomise them, and two processes on one
// machine share one. The ID also reveals the machine's address to anyone
// who decodes an ID (design.md: nothing may leak a MAC where unguessable
// IDs are asked for).
func NewMAC(mac net.HardwareAddr, opts ...Option) (Assigner, error) {
	if mac == nil {
		var err error
		if mac, err = firstMAC(); err != nil {
			return nil, err
		}
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("%w: mac %q is not a 48-bit address", ErrBadURL, mac)
	}
	s, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	var b [8]byte
	copy(b[2:], mac)
	return &fixed{s: s, id: int64(binary.BigEndian.Uint64(b[:])), source: "mac " + mac.String()}, nil
}

func isPrivateIPv4(ip net.IP) bool {
	// The ranges sony/sonyflake v2 accepts (isPrivateIPv4): RFC 1918 plus
	// link-local 169.254/16.
	return ip[0] == 10 ||
		ip[0] == 172 && ip[1] >= 16 && ip[1] < 32 ||
		ip[0] == 192 && ip[1] == 168 ||
		ip[0] == 169 && ip[1] == 254
}

func privateIPv4() (net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("worker: list interface addresses: %w", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() {
			continue
		}
		if v4 := n.IP.To4(); v4 != nil && isPrivateIPv4(v4) {
			return v4, nil
		}
	}
	return nil, fmt.Errorf("worker: ip: this machine has no private IPv4 address; give one as ip://10.0.0.7 or use another assigner")
}

func firstMAC() (net.HardwareAddr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("worker: list interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 && i.Flags&net.FlagUp != 0 && len(i.HardwareAddr) == 6 {
			return i.HardwareAddr, nil
		}
	}
	return nil, fmt.Errorf("worker: mac: this machine has no up interface with a 48-bit address; give one as mac://02:00:00:00:00:01 or use another assigner")
}
