package main

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// go-redis writes its own lines to the process's stderr ("redis: 2026/12/01
// 03:49:25 pool.go:770: redis: connection pool: failed to dial after 5
// attempts: ..."), four of them before idmint reports the same failure as
// its error. Every Redis error reaches idmint as a returned error, which
// idmint prints (CLI) or logs (serve) once, in its own format; so the
// client's own logger is silenced. redis.SetLogger is process-wide, which is
// why only the command sets it, never a library package.
func init() { redis.SetLogger(quietRedis{}) }

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
