package dev.idmint.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

class ClientTest {
    private final List<AutoCloseable> closing = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (AutoCloseable c : closing) {
            c.close();
        }
    }

    private FakeNode node(String name, FakeNode.Cluster cl) throws Exception {
        FakeNode n = new FakeNode(name, cl);
        closing.add(n);
        return n;
    }

    private IdmintClient client(IdmintClient.Builder b) {
        IdmintClient c = b.build();
        closing.add(0, c);
        return c;
    }

    /** draw runs threads callers, each drawing per IDs of key, and returns every ID drawn. */
    private static long[] draw(IdmintClient c, String key, int threads, int per) throws Exception {
        long[][] got = new long[threads][per];
        ConcurrentLinkedQueue<Throwable> errs = new ConcurrentLinkedQueue<>();
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            int tt = t;
            ts[t] = new Thread(() -> {
                try {
                    for (int i = 0; i < per; i++) {
                        got[tt][i] = c.next(key);
                    }
                } catch (Throwable x) {
                    errs.add(x);
                }
            });
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        if (!errs.isEmpty()) {
            throw new AssertionError("callers failed: " + errs.peek(), errs.peek());
        }
        return Arrays.stream(got).flatMapToLong(Arrays::stream).toArray();
    }

    private static void assertUnique(long[] ids) {
        long[] s = ids.clone();
        Arrays.sort(s);
        for (int i = 1; i < s.length; i++) {
            if (s[i] == s[i - 1]) {
                throw new AssertionError("ID " + s[i] + " handed out twice (of " + s.length + ")");
            }
        }
    }

    @Nested
    class Prefetch {
        @Test
        void segmentKeyFromRangesUniqueAcrossThreads() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()));
            long[] ids = draw(c, "order", 16, 20_000);
            assertUnique(ids);
            Stats s = c.stats();
            KeyStats k = s.keys().get("order");
            assertEquals("segment", k.strategy());
            assertTrue(k.prefetched());
            assertTrue(k.refills() >= 2, "refills: " + k.refills());
            assertEquals(1, a.idsRequests.get(), "only the probe asks /ids; the rest are ranges");
            assertTrue(a.rangeRequests.get() < 320_000 / 100, "ranges grow with the draw: " + a.rangeRequests.get() + " requests");
            assertEquals(0, s.errors());
        }

        @Test
        void rangesIncreaseWithinARefillAndBatchesComeFromIds() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment").key("flake", "snowflake");
            FakeNode a = node("a", cl);
            // One refill at a time: ranges arrive in order, so IDs increase throughout.
            IdmintClient c = client(IdmintClient.builder(a.url()).maxRefills(1));
            long prev = c.next("order");
            for (int i = 0; i < 1000; i++) {
                long id = c.next("order");
                assertTrue(id > prev, id + " after " + prev);
                prev = id;
            }
            long[] dst = new long[5000];
            c.next("flake", dst);
            assertUnique(dst);
            assertEquals("snowflake", c.stats().keys().get("flake").strategy());
        }

        @Test
        void prefetchIsBoundedInMemory() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()).batch(10, 1000).maxPrefetch(2000));
            draw(c, "order", 4, 50_000);
            long issued = cl.counters.get("order").get() - 1;
            assertTrue(issued - 200_000 <= 2000, "the client held or asked for " + (issued - 200_000) + " IDs beyond the draw; maxPrefetch 2000");
            assertTrue(c.buffered("order") <= 2000);
        }

        @Test
        void aServerThatEndsItsSegmentEarlyIsAskedForLess() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode a = node("a", cl);
            a.rangeLimit = 500;
            IdmintClient c = client(IdmintClient.builder(a.url()));
            assertUnique(draw(c, "order", 4, 20_000));
        }

        @Test
        void batchRequestsShrinkOnBadCount() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("flake", "snowflake");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()).maxCount(50_000));
            assertUnique(draw(c, "flake", 4, 30_000));
            assertEquals(0, c.stats().errors());
        }
    }

    @Nested
    class Failover {
        @Test
        void aNodeAnswering500IsRoutedAround() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode bad = node("bad", cl), good = node("good", cl);
            bad.mode = FakeNode.Mode.ERROR_500;
            IdmintClient c = client(IdmintClient.builder(bad.url(), good.url()).batch(10, 100));
            assertUnique(draw(c, "order", 8, 5000));
            Stats s = c.stats();
            assertTrue(s.failovers() > 0, "failovers: " + s.failovers());
            assertEquals(0, s.errors());
            assertTrue(!s.endpoints().get(0).up() || s.endpoints().get(0).failures() > 0);
        }

        @Test
        void garbageIsRetriedElsewhere() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode bad = node("bad", cl), good = node("good", cl);
            bad.mode = FakeNode.Mode.GARBAGE;
            IdmintClient c = client(IdmintClient.builder(bad.url(), good.url()).batch(10, 100));
            assertUnique(draw(c, "order", 4, 2000));
            assertEquals(0, c.stats().errors());
        }

        @Test
        void aHangingNodeIsHedged() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode hang = node("hang", cl), good = node("good", cl);
            hang.mode = FakeNode.Mode.HANG;
            IdmintClient c = client(IdmintClient.builder(hang.url(), good.url()).hedgeAfter(Duration.ofMillis(50)).attemptTimeout(Duration.ofSeconds(30)).batch(10, 100));
            assertTimeoutPreemptively(Duration.ofSeconds(20), () -> assertUnique(draw(c, "order", 4, 2000)));
            assertTrue(c.stats().hedges() > 0, "hedges: " + c.stats().hedges());
        }

        @Test
        void everyNodeDownThenUp() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode a = node("a", cl), b = node("b", cl);
            a.mode = FakeNode.Mode.ERROR_500;
            b.mode = FakeNode.Mode.ERROR_500;
            IdmintClient c = client(IdmintClient.builder(a.url(), b.url()).timeout(Duration.ofMillis(500)).backoff(Duration.ofMillis(10), Duration.ofMillis(50)));
            long t0 = System.nanoTime();
            IdmintUnavailableException x = assertThrows(IdmintUnavailableException.class, () -> c.next("order"));
            assertTrue(System.nanoTime() - t0 < Duration.ofSeconds(5).toNanos(), "the call ended near its timeout");
            assertEquals("order", x.key());
            assertNotNull(x.endpoint(), x.getMessage());
            assertTrue(x.getMessage().contains("store down"), x.getMessage());
            assertTrue(x.retryable());
            assertEquals(1, c.stats().errors());
            a.mode = FakeNode.Mode.OK;
            b.mode = FakeNode.Mode.OK;
            assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
                while (true) {
                    try {
                        c.next("order");
                        return;
                    } catch (IdmintUnavailableException again) {
                        // breakers still open: the next call probes
                    }
                }
            });
        }

        @Test
        void rateLimitedNodeIsLeftAloneForRetryAfter() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode busy = node("busy", cl), good = node("good", cl);
            busy.mode = FakeNode.Mode.RATE_LIMITED;
            IdmintClient c = client(IdmintClient.builder(busy.url(), good.url()).batch(10, 10).maxPrefetch(20).breakerThreshold(1));
            long t0 = System.nanoTime();
            draw(c, "order", 1, 300);
            long secs = (System.nanoTime() - t0) / 1_000_000_000L + 1;
            // Retry-After: 1 keeps it out for a second after each refusal:
            // one request a second at most (two refills in flight may both
            // ask it first), not one per refill: 30 refills were made.
            assertTrue(busy.requests.get() <= 2 + secs, "the rate-limited node was asked " + busy.requests.get() + " times in " + secs + " s");
            assertTrue(good.requests.get() >= 25, "refills went to the other node: " + good.requests.get());
        }
    }

    @Nested
    class Refusals {
        @Test
        void unknownKeyIsPermanentAndNamesKeyAndEndpoint() throws Exception {
            FakeNode a = node("a", new FakeNode.Cluster());
            IdmintClient c = client(IdmintClient.builder(a.url()));
            IdmintRequestException x = assertThrows(IdmintRequestException.class, () -> c.next("nope"));
            assertEquals("nope", x.key());
            assertEquals(a.url(), x.endpoint());
            assertEquals("unknown_key", x.code());
            assertEquals(404, x.status());
            assertTrue(x.getMessage().contains("\"nope\""), x.getMessage());
        }

        @Test
        void badKeyNameIsRefusedBeforeAnyRequest() throws Exception {
            FakeNode a = node("a", new FakeNode.Cluster());
            IdmintClient c = client(IdmintClient.builder(a.url()));
            IdmintRequestException x = assertThrows(IdmintRequestException.class, () -> c.next("a/b"));
            assertEquals("key", x.field());
            assertEquals("key", assertThrows(IdmintRequestException.class, () -> c.next(null)).field());
            assertEquals("key", assertThrows(IdmintRequestException.class, () -> c.next("")).field());
            assertEquals(0, a.requests.get());
        }

        @Test
        void perKeyTokens() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment").key("pay", "segment");
            FakeNode a = node("a", cl);
            a.tokens.put("pay", "pay-secret");
            IdmintClient c = client(IdmintClient.builder(a.url()).token("all").tokens(Map.of("pay", "pay-secret")));
            c.next("order");
            c.next("pay");
            assertEquals("Bearer all", a.lastAuth.get("order"));
            assertEquals("Bearer pay-secret", a.lastAuth.get("pay"));
            a.tokens.put("order", "other");
            IdmintClient wrong = client(IdmintClient.builder(a.url()).token("all"));
            IdmintRequestException x = assertThrows(IdmintRequestException.class, () -> wrong.next("order"));
            assertEquals(401, x.status());
            assertEquals("unauthorized", x.code());
        }

        @Test
        void builderNamesTheSettingAndValue() {
            IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> IdmintClient.builder("ftp://x").build());
            assertTrue(x.getMessage().contains("endpoints") && x.getMessage().contains("ftp://x"), x.getMessage());
            x = assertThrows(IllegalArgumentException.class, () -> IdmintClient.builder("http://x:1").maxRefills(0).build());
            assertTrue(x.getMessage().contains("maxRefills: 0"), x.getMessage());
            x = assertThrows(IllegalArgumentException.class, () -> IdmintClient.builder("http://x:1").timeout(Duration.ZERO).build());
            assertTrue(x.getMessage().contains("timeout"), x.getMessage());
        }

        @Test
        void closedClientThrows() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()));
            IdSource src = c.source("order");
            src.next();
            c.close();
            assertThrows(IdmintClosedException.class, () -> c.next("order"));
            assertThrows(IdmintClosedException.class, src::next);
        }
    }

    @Nested
    class Monotonic {
        @Test
        void neverPrefetchedAndInRealTimeOrder() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("seq", "monotonic");
            FakeNode a = node("a", cl), b = node("b", cl);
            a.leader = "b";
            b.leader = "b";
            IdmintClient c = client(IdmintClient.builder(a.url(), b.url()));
            long prev = 0;
            for (int i = 0; i < 200; i++) {
                long id = c.next("seq");
                assertTrue(id > prev, id + " after " + prev);
                prev = id;
                assertEquals(0, c.buffered("seq"), "a monotonic key holds nothing");
            }
            // Every call got IDs from a request sent after it began: the
            // counter moved at most by the probe's gap past what was drawn.
            assertTrue(cl.counters.get("seq").get() - 1 <= 201, "issued " + (cl.counters.get("seq").get() - 1) + " for 200 calls");
            assertEquals("b", c.stats().keys().get("seq").leader());
            assertTrue(b.rangeRequests.get() >= 190, "requests went to the leader: " + b.rangeRequests.get() + " of 200");
        }

        @Test
        void concurrentCallsShareRequestsAndStayLinearizable() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("seq", "monotonic");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()));
            int threads = 32, per = 300;
            long[][] ops = new long[threads * per][];
            AtomicLong clock = new AtomicLong();
            Thread[] ts = new Thread[threads];
            for (int t = 0; t < threads; t++) {
                int tt = t;
                ts[t] = new Thread(() -> {
                    for (int i = 0; i < per; i++) {
                        long s = System.nanoTime();
                        long id = c.next("seq");
                        ops[tt * per + i] = new long[] {s, System.nanoTime(), id};
                    }
                });
                ts[t].start();
            }
            for (Thread t : ts) {
                t.join();
            }
            // Every ID of a call that returned before another began is below it.
            long[][] byEnd = ops.clone();
            Arrays.sort(byEnd, (x, y) -> Long.compare(x[1], y[1]));
            long[][] byStart = ops.clone();
            Arrays.sort(byStart, (x, y) -> Long.compare(x[0], y[0]));
            long maxDone = Long.MIN_VALUE;
            int j = 0;
            for (long[] op : byStart) {
                while (j < byEnd.length && byEnd[j][1] < op[0]) {
                    maxDone = Math.max(maxDone, byEnd[j][2]);
                    j++;
                }
                assertTrue(op[2] > maxDone, "ID " + op[2] + " is below " + maxDone + ", returned before its call began");
            }
            assertUnique(Arrays.stream(ops).mapToLong(o -> o[2]).toArray());
            long req = c.stats().keys().get("seq").requests();
            assertTrue(req < threads * per, "calls shared requests: " + req + " for " + threads * per + " calls");
        }
    }

    @Nested
    class KeysThatChange {
        @Test
        void aNewGenerationDropsTheBuffer() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()));
            for (int i = 0; i < 1000; i++) {
                c.next("order");
            }
            cl.strategies.put("order", "monotonic");
            a.generation = "g2";
            // The buffer is dropped with the next answer that says so; from
            // then on the key is served by shared requests.
            assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
                while (c.stats().keys().get("order").resets() == 0) {
                    c.next("order");
                }
            });
            while (c.stats().keys().get("order").prefetched() || c.stats().keys().get("order").strategy() == null) {
                c.next("order");
            }
            assertEquals("monotonic", c.stats().keys().get("order").strategy());
            assertEquals(0, c.buffered("order"));
        }
    }

    @Nested
    class Text {
        @Test
        void textKeysGiveStrings() throws Exception {
            FakeNode.Cluster cl = new FakeNode.Cluster().key("uid", "uuid").key("order", "segment");
            FakeNode a = node("a", cl);
            IdmintClient c = client(IdmintClient.builder(a.url()));
            String s = c.nextString("uid");
            assertEquals(36, s.length(), s);
            assertEquals(5, c.nextStrings("uid", 5).stream().distinct().count());
            IdmintRequestException x = assertThrows(IdmintRequestException.class, () -> c.next("uid"));
            assertEquals("text_key", x.code());
            assertEquals("uid", x.key());
            assertTrue(Long.parseLong(c.nextString("order")) > 0);
        }

        @Test
        void decodeReadsTheServersAnswer() throws Exception {
            FakeNode a = node("a", new FakeNode.Cluster());
            IdmintClient c = client(IdmintClient.builder(a.url()));
            Decoded d = c.decode(2128224929701691400L);
            assertEquals("2128224929701691400", d.id());
            assertEquals("leaf", d.layout());
            assertEquals(1796243338405L, d.unixMs());
            assertEquals(1796243338405L, d.time().toEpochMilli());
            assertEquals(3, d.node());
            assertEquals(8, d.sequence());
            assertEquals("{dc=1}", String.valueOf(d.extra().get("extra")));
        }
    }
}
