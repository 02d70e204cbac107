package strategies

import (
	"math"

	"github.com/idmint/idmint/server"
)

// int64Ceiling is the largest ID a counter key (segment, ticket, monotonic
// counter form) may issue: its IDs are signed 64-bit integers. No counter
// strategy has a JavaScript-safe option; a redis key's ceiling is
// rediscounter.MaxValue (2^53-1), what Lua's doubles count exactly.
const int64Ceiling = math.MaxInt64

// counterStats are a counter key's runway: its ceiling and the headroom
// left above the largest ID it issued or claimed from its store. The
// headroom is computed in integers and only then made a float64, so it is
// exact where it matters (near zero) although a float64 holds a ceiling of
// 2^63-1 as 2^63.
func counterStats(ceiling, highest int64) []server.Stat {
	head := ceiling - max(highest, 0)
	return []server.Stat{
		{Name: "counter_ceiling", Help: "The largest ID a counter key may issue: 2^63-1 (2^53-1 for redis keys; with regions, the top of this region's share). As a float64 it reads 2^63; watch idmint_counter_headroom.",
			Value: float64(ceiling)},
		{Name: "counter_headroom", Help: "IDs a counter key may still issue: its ceiling minus the largest ID it issued or claimed from its store (segment, ticket, redis, monotonic counter form); computed exactly before the float64 conversion.",
			Value: float64(head)},
	}
}

// runway is counterStats for a key on the region's share of the number
// line: ceiling and highest are the store's counter values (what the
// region maps to Base|n), the ceiling no higher than the region's Limit,
// so the headroom is what the region may still issue before its share
// runs out (and it refuses), not what the whole line has left.
func (l regionLine) runway(ceiling, highest int64) []server.Stat {
	if !l.on {
		return counterStats(ceiling, highest)
	}
	c := min(ceiling, l.line.Limit)
	return counterStats(l.line.Base|c, l.line.Base|max(min(highest, c), 0))
}
