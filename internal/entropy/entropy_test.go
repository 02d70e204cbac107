package entropy

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestReaderStreamIsContiguous(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3*bufSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	s := New(bytes.NewReader(data))
	var got []byte
	// Mix 8-byte and odd-sized reads across the buffer boundary.
	for len(got)+13+8 <= len(data) {
		v, err := s.Uint64()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		p := make([]byte, 13)
		if err := s.Fill(p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p...)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("stream skipped or reordered bytes")
	}
}

func TestReaderErrorIsReturned(t *testing.T) {
	t.Parallel()
	s := New(bytes.NewReader(make([]byte, 10)))
	if _, err := s.Uint64(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Uint64 on short reader = %v, want io.ErrUnexpectedEOF", err)
	}
	if err := s.Fill(make([]byte, 4)); err == nil {
		t.Fatal("Fill on exhausted reader succeeded")
	}
}

func TestDefaultSourcesDiffer(t *testing.T) {
	t.Parallel()
	a, b := New(nil), New(nil)
	x, _ := a.Uint64()
	y, _ := b.Uint64()
	if x == y {
		t.Fatal("two default sources produced the same first word")
	}
	p := make([]byte, 32)
	if err := a.Fill(p); err != nil || bytes.Equal(p, make([]byte, 32)) {
		t.Fatalf("Fill = %v, %x", err, p)
	}
}

func BenchmarkUint64(b *testing.B) {
	s := New(nil)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = s.Uint64()
	}
}
