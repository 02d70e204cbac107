package monotonic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The peer stream's frames. After the handshake (an HTTP/1.1 upgrade of a
// POST to streamPath, authenticated like a forwarded request), both sides
// exchange frames, big-endian:
//
//	0      4      5              13             21
//	+------+------+--------------+--------------+------------------+
//	| size | kind |  request id  |    value     | text (errors)    |
//	+------+------+--------------+--------------+------------------+
//
// size counts the bytes after it (17 plus the text). The follower sends
// frameNext (value: the count); the leader answers each with frameIDs
// (value: the first of count consecutive IDs) or frameError (value: an
// errCode, text: why), in any order, naming the request id. A frameError
// with request id 0 is about the connection, which its sender closes.
const (
	frameHeader  = 4 + 17
	frameMaxText = 1024

	frameNext  byte = 1 // follower → leader: reserve value IDs
	frameIDs   byte = 2 // leader → follower: the first ID
	frameError byte = 3 // leader → follower: refused, value is an errCode
)

// errCode says why a leader refused a frame.
type errCode int64

const (
	codeUnavailable  errCode = 1 // not the proven leader (or closing): the follower finds the leader again
	codeBadCount     errCode = 2 // the count is out of range
	codeNoSource     errCode = 3 // no source of that name here
	codeUnauthorized errCode = 4 // the token no longer matches (the secret changed): the connection closes
	codeBadFrame     errCode = 5 // a malformed frame: the connection closes
)

// frame is one decoded frame.
type frame struct {
	kind  byte
	id    uint64
	value int64
	text  string
}

// appendFrame encodes f (its text cut to frameMaxText) onto b.
func appendFrame(b []byte, f frame) []byte {
	text := f.text
	if len(text) > frameMaxText {
		text = text[:frameMaxText]
	}
	b = binary.BigEndian.AppendUint32(b, uint32(17+len(text)))
	b = append(b, f.kind)
	b = binary.BigEndian.AppendUint64(b, f.id)
	b = binary.BigEndian.AppendUint64(b, uint64(f.value))
	return append(b, text...)
}

// errBadFrame is wrapped by readFrame's errors for a malformed frame (as
// opposed to a connection that ended).
var errBadFrame = errors.New("bad frame")

// readFrame reads one frame into buf's storage (which must hold
// frameHeader+frameMaxText bytes). It checks sizes and kinds only; what a
// frame means is the reader's business.
func readFrame(r io.Reader, buf []byte) (frame, error) {
	if _, err := io.ReadFull(r, buf[:frameHeader]); err != nil {
		return frame{}, err
	}
	size := binary.BigEndian.Uint32(buf[:4])
	if size < 17 || size > 17+frameMaxText {
		return frame{}, fmt.Errorf("%w: size %d is not in 17..%d", errBadFrame, size, 17+frameMaxText)
	}
	f := frame{kind: buf[4], id: binary.BigEndian.Uint64(buf[5:13]), value: int64(binary.BigEndian.Uint64(buf[13:21]))}
	switch f.kind {
	case frameNext, frameIDs:
		if size != 17 {
			return frame{}, fmt.Errorf("%w: kind %d has size %d, want 17", errBadFrame, f.kind, size)
		}
	case frameError:
		text := buf[frameHeader : frameHeader+int(size-17)]
		if _, err := io.ReadFull(r, text); err != nil {
			return frame{}, err
		}
		f.text = string(text)
	default:
		return frame{}, fmt.Errorf("%w: kind %d is not %d (next), %d (ids) or %d (error)", errBadFrame, f.kind, frameNext, frameIDs, frameError)
	}
	return f, nil
}
