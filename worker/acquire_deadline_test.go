package worker

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idmint/idmint/clock"
	"github.com/idmint/idmint/testkit/testserver"
)

// slowClaimClock is a fake clock on which every wall-clock reading takes
// step: the coordinators read the wall clock for the claim's record (its
// "since" or Leaf timestamp) between the acquire's first request and its
// claim, so on this clock the claim is answered step after it was sent.
type slowClaimClock struct {
	*clock.Fake
	step time.Duration
	nows atomic.Int32
}

func (c *slowClaimClock) Now() time.Time {
	c.nows.Add(1)
	now := c.Fake.Now()
	c.Fake.Advance(c.step)
	return now
}

// TestAcquireDeadlineFromSendTime: a lease's first deadline counts from
// when the acquire was sent, not from when its claim was answered: a claim
// that takes 2 s leaves the lease 2 s less, never 2 s more.
func TestAcquireDeadlineFromSendTime(t *testing.T) {
	var kinds []struct{ name, url string }
	if os.Getenv("IDMINT_TEST_ETCD") != "" || os.Getenv("CI") == "true" {
		addr := testserver.Addr(t, testserver.Etcd)
		kinds = append(kinds, struct{ name, url string }{"etcd", "etcd://" + addr + "/idmint?name=" + testserver.Prefix(t) + "-acquire"})
	}
	if os.Getenv("IDMINT_TEST_ZOOKEEPER") != "" || os.Getenv("CI") == "true" {
		addr := testserver.Addr(t, testserver.ZooKeeper)
		kinds = append(kinds, struct{ name, url string }{"zookeeper", fmt.Sprintf("zk://%s/%s/snowflake/app?endpoint=10.0.0.1:8080", addr, testserver.Prefix(t))})
	}
	if len(kinds) == 0 {
		t.Skip("needs etcd or ZooKeeper (IDMINT_TEST_ETCD, IDMINT_TEST_ZOOKEEPER; scripts/test.sh sets them)")
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			clk := &slowClaimClock{Fake: clock.NewFake(t0), step: 2 * time.Second}
			a, err := Open(ctx, k.url, WithTTL(10*time.Second), WithClock(clk))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			before := clk.Mono()
			clk.nows.Store(0)
			l, err := a.Acquire(ctx, 7)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if clk.nows.Load() == 0 {
				t.Fatal("Acquire read no wall time: this test's slow claim no longer happens inside it")
			}
			if want := before + l.ttl - l.margin; l.ValidUntil() != want {
				t.Fatalf("lease acquired at %v with a claim answered at %v is valid until %v; want the acquire's send time + TTL - margin = %v",
					before, clk.Mono(), l.ValidUntil(), want)
			}
		})
	}
}
