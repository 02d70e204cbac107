package idformat

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idmint/idmint/flake128"
	"github.com/idmint/idmint/internal/idtext"
	"github.com/idmint/idmint/ksuid"
	"github.com/idmint/idmint/objectid"
	"github.com/idmint/idmint/timeid"
	"github.com/idmint/idmint/ulid"
	"github.com/idmint/idmint/uuid"
	"github.com/idmint/idmint/xid"
)

// Format names of the built-in decoders.
const (
	UUID       = "uuid"
	ULID       = "ulid"
	KSUID      = "ksuid"
	XID        = "xid"
	ObjectID   = "objectid"
	Flake128   = "flake128"
	TimeRandom = "timeid-random"
	TimeMember = "timeid-member"
	TimeGene   = "timeid-gene"
)

func builtins() []Decoder {
	return []Decoder{
		{Name: UUID, Match: matchUUID, Decode: decodeUUID},
		{Name: ULID, Match: func(s string) bool { return len(s) == 26 && all(s, isCrockford) }, Decode: decodeULID},
		{Name: KSUID, Match: func(s string) bool { return len(s) == 27 && all(s, isBase62) }, Decode: decodeKSUID},
		{Name: ObjectID, Match: func(s string) bool { return len(s) == 24 && all(s, isHex) }, Decode: decodeObjectID},
		{Name: Flake128, Match: matchFlake128, Decode: decodeFlake128, Prefer: func(s string) bool { return strings.HasPrefix(s, "0000") }},
		{Name: XID, Match: func(s string) bool { return len(s) == 20 && all(s, isBase32Hex) }, Decode: decodeXID},
		{Name: TimeRandom, Decode: decodeTimeID(TimeRandom, timeid.DecodeRandom)},
		{Name: TimeMember, Decode: decodeTimeID(TimeMember, timeid.DecodeMember)},
		{Name: TimeGene, Decode: decodeTimeID(TimeGene, timeid.DecodeGene)},
	}
}

func all(s string, ok func(byte) bool) bool {
	for i := range len(s) {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isBase32Hex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'v' }

func isCrockford(c byte) bool {
	if 'a' <= c && c <= 'z' {
		c -= 'a' - 'A'
	}
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U'
}

func matchUUID(s string) bool {
	switch len(s) {
	case 36, 38, 45:
		return true
	case 32:
		// Bare hex is a UUID only if it carries the RFC 9562 variant and a
		// defined version; otherwise it is read as a flake128.
		return all(s, isHex) && strings.ContainsRune("89abAB", rune(s[16])) && '1' <= s[12] && s[12] <= '8'
	}
	return false
}

func matchFlake128(s string) bool {
	return len(s) == 32 && all(s, isHex) || len(s) == 22 && all(s, isBase62)
}

var uuidVersions = map[int]string{
	1: "Gregorian time + node", 2: "DCE security", 3: "MD5 name-based", 4: "random",
	5: "SHA-1 name-based", 6: "reordered Gregorian time", 7: "Unix time (ms)", 8: "custom",
}

func decodeUUID(s string) (Parts, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return Parts{}, err
	}
	p := Parts{Canonical: u.String(), Bytes: u[:], Variant: u.Variant().String()}
	switch {
	case u == uuid.Nil:
		p.Notes = append(p.Notes, "the Nil UUID (RFC 9562 §5.9)")
		return p, nil
	case u == uuid.Max:
		p.Notes = append(p.Notes, "the Max UUID (RFC 9562 §5.10)")
		return p, nil
	case u.Variant() != uuid.VariantRFC9562:
		p.Notes = append(p.Notes, "not an RFC 9562 variant: fields are not defined here")
		return p, nil
	}
	p.Version = u.Version()
	if name, ok := uuidVersions[p.Version]; ok {
		p.Variant += ", " + name
	} else {
		p.Notes = append(p.Notes, fmt.Sprintf("version %d is not defined by RFC 9562", p.Version))
	}
	if t, ok := u.Time(); ok {
		p.Time = t
		p.Precision = 100 * time.Nanosecond
		if p.Version == 7 {
			p.Precision = time.Millisecond
		}
	}
	switch p.Version {
	case 1, 6:
		seq, _ := u.ClockSeq()
		node, _ := u.Node()
		p.Sequence, p.HasSeq = uint64(seq), true
		p.Node = hex.EncodeToString(node[:])
		if node[0]&1 == 1 {
			p.Notes = append(p.Notes, "node has the multicast bit set: random, not a MAC address (RFC 9562 §6.10)")
		} else {
			p.Notes = append(p.Notes, "node may be the generating machine's MAC address")
		}
		if p.Version == 1 {
			sw := uuid.ToSwapped(u)
			p.Notes = append(p.Notes, "MySQL UUID_TO_BIN(uuid, 1): "+strings.ToUpper(hex.EncodeToString(sw[:])))
		}
	case 4:
		p.Random = hex.EncodeToString(u[:])
		p.Notes = append(p.Notes, "122 random bits (version and variant bits included in the hex)")
	case 7:
		p.Random = hex.EncodeToString(u[6:])
		p.Notes = append(p.Notes, "rand_a and rand_b: a generator's counter (RFC 9562 §6.2) cannot be told apart from random bits")
	}
	return p, nil
}

func decodeULID(s string) (Parts, error) {
	id, err := ulid.Parse(s)
	if err != nil {
		return Parts{}, err
	}
	return Parts{Canonical: id.String(), Bytes: id[:], Time: id.Timestamp().UTC(), Precision: time.Millisecond, Random: hex.EncodeToString(id.Entropy())}, nil
}

func decodeKSUID(s string) (Parts, error) {
	id, err := ksuid.Parse(s)
	if err != nil {
		return Parts{}, err
	}
	return Parts{Canonical: id.String(), Bytes: id.Bytes(), Time: id.Time().UTC(), Precision: time.Second, Random: hex.EncodeToString(id.Payload())}, nil
}

func decodeObjectID(s string) (Parts, error) {
	id, err := objectid.Parse(s)
	if err != nil {
		return Parts{}, err
	}
	r, m := id.Random(), id.Machine()
	return Parts{
		Canonical: id.String(), Bytes: id[:], Time: id.Time(), Precision: time.Second,
		Node: hex.EncodeToString(r[:]), Sequence: uint64(id.Counter()), HasSeq: true,
		Notes: []string{
			"node is the 5-byte per-process random value (current ObjectID specification)",
			fmt.Sprintf("legacy reading (pre-3.4 drivers): machine %s, pid %d", hex.EncodeToString(m[:]), id.PID()),
		},
	}, nil
}

func decodeXID(s string) (Parts, error) {
	id, err := xid.Parse(s)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Canonical: id.String(), Bytes: id.Bytes(), Time: id.Time().UTC(), Precision: time.Second,
		Node: hex.EncodeToString(id.Machine()), PID: int(id.Pid()), Sequence: uint64(id.Counter()), HasSeq: true,
	}, nil
}

func decodeFlake128(s string) (Parts, error) {
	id, err := flake128.Parse(s)
	if err != nil {
		return Parts{}, err
	}
	var w [8]byte
	for i := range 6 {
		w[2+i] = byte(id.Worker() >> (40 - 8*i))
	}
	p := Parts{
		Canonical: id.String(), Bytes: id[:], Time: id.Time(), Precision: time.Millisecond,
		Node: hex.EncodeToString(w[2:]), Sequence: uint64(id.Seq()), HasSeq: true,
		Notes: []string{"hex form: " + id.Hex(), fmt.Sprintf("node is the 48-bit worker, %d in decimal (gen flake128 --worker): a leased ID or the machine's MAC address", id.Worker())},
	}
	return p, nil
}

func decodeTimeID(kind string, dec func(int64) (timeid.Parts, error)) func(string) (Parts, error) {
	return func(s string) (Parts, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Parts{}, fmt.Errorf("timeid: %s is not a non-negative 63-bit decimal integer: %w", idtext.Quote(s), err)
		}
		tp, err := dec(n)
		if err != nil {
			return Parts{}, err
		}
		p := Parts{Canonical: strconv.FormatInt(n, 10), Time: tp.Time, Precision: time.Millisecond}
		switch kind {
		case TimeGene:
			p.Node = strconv.FormatUint(tp.Worker, 10)
			p.Sequence, p.HasSeq = tp.Seq, true
			p.Notes = append(p.Notes, fmt.Sprintf("gene (shard) %d; default layout: 4 worker, 10 sequence, 8 gene bits", tp.Gene))
		case TimeMember:
			p.Notes = append(p.Notes, fmt.Sprintf("member ID %d, in clear", tp.Member))
		default:
			p.Random = strconv.FormatUint(tp.Random, 16)
		}
		return p, nil
	}
}
