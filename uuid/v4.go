package uuid

import (
	"context"
	"sync"

	"github.com/idmint/idmint/internal/entropy"
)

// V4 issues random UUIDs (RFC 9562 §5.4): 122 random bits. Two IDs collide
// with probability 2^-122; among n IDs, about n²/2^123. Safe for
// concurrent use.
type V4 struct {
	mu   sync.Mutex
	src  *entropy.Source // Settings.Rand, under mu; nil when pool is used
	pool sync.Pool       // of *entropy.Source: one CSPRNG per P, no lock
}

// NewV4 returns a V4 generator. Only Settings.Rand is used.
func NewV4(s Settings) (*V4, error) {
	if _, err := s.withDefaults(); err != nil {
		return nil, err
	}
	g := &V4{}
	if s.Rand != nil {
		g.src = entropy.New(s.Rand)
	} else {
		g.pool.New = func() any { return entropy.New(nil) }
	}
	return g, nil
}

// Next returns a new random UUID. It fails only when Settings.Rand does.
func (g *V4) Next(ctx context.Context) (UUID, error) {
	var u UUID
	if g.src == nil {
		src := g.pool.Get().(*entropy.Source)
		_ = src.Fill(u[:]) // a default Source never fails
		g.pool.Put(src)
	} else {
		g.mu.Lock()
		err := g.src.Fill(u[:])
		g.mu.Unlock()
		if err != nil {
			return Nil, err
		}
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u, nil
}
