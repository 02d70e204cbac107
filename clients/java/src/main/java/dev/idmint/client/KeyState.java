package dev.idmint.client;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * KeyState is one key's buffer: the current chunk, consumed lock-free
 * with one atomic add, and a queue of chunks behind it, refilled in the
 * background by up to maxRefills requests at a time; or, for a key that
 * is not prefetched (monotonic), the requests its calls share.
 *
 * <p>Everything but the hot path is guarded by mu; no one holds mu while
 * waiting for the network.
 */
final class KeyState {
    // How a key is served.
    static final int UNKNOWN = 0; // no answer yet: the first refill asks for one ID and learns the strategy
    static final int RANGE = 1; // prefetched ranges (segment)
    static final int BATCH = 2; // prefetched batches of IDs (snowflake, ticket, redis)
    static final int DIRECT = 3; // shared requests sent after the calls began (monotonic, unknown strategies)
    static final int TEXT = 4; // text IDs: next() refuses, nextString() serves

    static final long ANY_EPOCH = -1;
    private static final long RATE_WINDOW = TimeUnit.MILLISECONDS.toNanos(10);
    private static final double RATE_DECAY = TimeUnit.SECONDS.toNanos(2);
    private static final int LAT_WINDOW = 64;

    final String name;
    final String path; // "/v1/keys/<name, escaped>"
    final String token;
    final IdmintClient c;
    private final IdmintClient.Builder o;

    volatile Chunk cur = Chunk.EMPTY;
    volatile int mode = UNKNOWN;
    volatile String leader; // the node name answers give as the key's leader
    final Shared shared;

    final ReentrantLock mu = new ReentrantLock();
    private final Condition changed = mu.newCondition();
    private String strategy;
    private long epoch; // counts resets: a refill started before one buffers nothing
    private final String[] gens; // the key's generation on each endpoint, null before an answer said
    private final ArrayDeque<Chunk> queue = new ArrayDeque<>(); // behind cur; ranges in increasing order
    private long queued;
    private final ArrayDeque<Object> line = new ArrayDeque<>(); // calls waiting, in arrival order

    private int inflight;
    private long asked, expected, lastGot;
    private boolean retryPending; // a refill failed: the next waits out a backoff
    private IdmintException lastErr; // the last refill's failure, null after a success
    private IdmintException permErr; // the last refill's permanent failure
    private long failSeq; // counts refill failures

    // The draw rate, estimated from the IDs that left the buffer.
    private long supplied;
    private double rate; // IDs per nanosecond
    private boolean sampled, hungry;
    private long sampleAt, sampleDrawn;

    private final long[] lats = new long[LAT_WINDOW];
    private int latN;
    private long latMax, target;

    final AtomicLong refills = new AtomicLong(), refillErrors = new AtomicLong();
    final AtomicLong waits = new AtomicLong(), waitNanos = new AtomicLong(), waitMax = new AtomicLong();
    final AtomicLong requests = new AtomicLong(), resets = new AtomicLong();

    KeyState(IdmintClient c, String name, String token) {
        this.c = c;
        this.o = c.opts;
        this.name = name;
        this.token = token;
        this.path = "/v1/keys/" + URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20");
        this.gens = new String[c.pool.eps.length];
        this.shared = new Shared(this);
    }

    // ---- the hot path ----

    long next() {
        Chunk ch = cur;
        if (ch.n != 0) { // an empty chunk is never counted: all callers of a monotonic key would share its counter
            long i = ch.getAndIncrement();
            if (i < ch.n) {
                if (i == ch.low) {
                    kick();
                }
                return ch.id(i);
            }
        }
        long[] one = new long[1];
        fill(one, 0);
        return one[0];
    }

    void nextN(long[] dst) {
        int got = take(dst, 0);
        if (got < dst.length) {
            fill(dst, got);
        }
    }

    /** take fills dst from got on from the current chunk without waiting; returns the new got. */
    private int take(long[] dst, int got) {
        while (got < dst.length) {
            Chunk ch = cur;
            long i = ch.get();
            if (i >= ch.n) {
                return got;
            }
            int m = (int) Math.min(dst.length - got, ch.n - i);
            if (!ch.compareAndSet(i, i + m)) {
                continue;
            }
            if (ch.ids == null) {
                long f = ch.first + i - got;
                for (int j = got, e = got + m; j < e; j++) {
                    dst[j] = f + j;
                }
            } else {
                System.arraycopy(ch.ids, (int) i, dst, got, m);
            }
            got += m;
            if (i <= ch.low && ch.low < i + m) {
                kick();
            }
        }
        return got;
    }

    /** kick checks the prefetch distance; a caller never waits for the lock here. */
    private void kick() {
        if (mu.tryLock()) {
            try {
                topUpLocked();
            } finally {
                mu.unlock();
            }
        } else {
            c.run(this::check);
        }
    }

    private void check() {
        mu.lock();
        try {
            topUpLocked();
        } finally {
            mu.unlock();
        }
    }

    // ---- the slow path: waiting in line ----

    /**
     * fill fills dst from got on, waiting in line for refills up to the
     * client's timeout. Calls in line are served in the order they came.
     */
    private void fill(long[] dst, int got) {
        long start = System.nanoTime();
        long deadline = start + o.timeout.toNanos();
        if (mode == DIRECT) {
            // Not prefetched: straight to the shared requests, without
            // taking mu (hundreds of callers of a monotonic key convoyed
            // on it, one park and wake-up each).
            if (c.closed) {
                throw new IdmintClosedException(name);
            }
            shared.fill(dst, got, deadline);
            return;
        }
        Object me = null;
        boolean direct = false;
        mu.lock();
        try {
            long seenFail = failSeq;
            while (true) {
                if (c.closed) {
                    throw new IdmintClosedException(name);
                }
                int m = mode;
                if (m == DIRECT) {
                    direct = true;
                    break;
                }
                if (m == TEXT) {
                    throw textError();
                }
                if (me == null ? line.isEmpty() : line.peekFirst() == me) {
                    got = take(dst, got);
                    if (got == dst.length) {
                        return;
                    }
                    if (promoteLocked()) {
                        continue;
                    }
                }
                if (me == null) {
                    me = new Object();
                    line.addLast(me);
                    hungry = true;
                }
                if (permErr != null && failSeq != seenFail) {
                    IdmintException x = permErr;
                    c.errors.incrementAndGet();
                    throw new IdmintRequestException(name, x.endpoint(), x.status(), x.code(), x.field(), x.detail);
                }
                topUpLocked();
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    c.errors.incrementAndGet();
                    throw unavailable(lastErr, "no IDs within " + o.timeout.toMillis() + " ms");
                }
                changed.awaitNanos(left);
            }
        } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
            throw new IdmintException(name, null, 0, null, null, true, "interrupted while waiting for IDs", x);
        } finally {
            if (me != null) {
                line.remove(me);
                changed.signalAll(); // the next in line may take
                long w = System.nanoTime() - start;
                waits.incrementAndGet();
                c.waits.incrementAndGet();
                waitNanos.addAndGet(w);
                waitMax.accumulateAndGet(w, Math::max);
            }
            mu.unlock();
        }
        if (direct) {
            shared.fill(dst, got, deadline);
        }
    }

    IdmintException textError() {
        return new IdmintRequestException(name, null, 0, "text_key", "key",
                "the key issues text IDs (strategy " + strategy + "): use nextString");
    }

    IdmintUnavailableException unavailable(IdmintException last, String why) {
        String msg = why;
        if (last != null) {
            msg += "; last failure: " + last.getMessage();
        }
        return new IdmintUnavailableException(name, last, msg);
    }

    /** promoteLocked makes the first queued chunk current when the current one is used up. */
    private boolean promoteLocked() {
        if (cur.left() > 0) {
            return true;
        }
        Chunk ch = queue.pollFirst();
        if (ch == null) {
            return false;
        }
        queued -= ch.n;
        cur = ch;
        return true;
    }

    private long levelLocked() {
        return cur.left() + queued;
    }

    long buffered() {
        mu.lock();
        try {
            return levelLocked();
        } finally {
            mu.unlock();
        }
    }

    // ---- the prefetch distance ----

    /**
     * observeLocked updates the draw rate: measured over at least 10 ms
     * from the IDs that left the buffer; it rises at once to what was
     * measured (twice that when a call had to wait meanwhile) and falls
     * with a time constant of 2 s.
     */
    private void observeLocked(long now, long level) {
        long drawn = supplied - level;
        if (!sampled) {
            sampled = true;
            sampleAt = now;
            sampleDrawn = drawn;
            return;
        }
        long dt = now - sampleAt;
        if (dt < RATE_WINDOW) {
            return;
        }
        double r = (double) (drawn - sampleDrawn) / dt;
        if (hungry) {
            r *= 2;
        }
        rate = r >= rate ? r : r + (rate - r) * Math.exp(-dt / RATE_DECAY);
        sampleAt = now;
        sampleDrawn = drawn;
        hungry = false;
    }

    /** targetLocked: rate × (2 × refill latency + failover allowance), within [minBatch, maxPrefetch]. */
    private long targetLocked() {
        long failover = o.hedgeAfter.isNegative() ? o.attemptTimeout.toNanos() : o.hedgeAfter.toNanos();
        double t = rate * (2.0 * latMax + failover);
        return clamp(t, o.minBatch, o.maxPrefetch);
    }

    private long batchLocked() {
        return clamp(rate * o.refillEvery.toNanos(), o.minBatch, o.maxBatch);
    }

    private static long clamp(double v, long lo, long hi) {
        if (!(v > lo)) {
            return lo;
        }
        return v >= hi ? hi : (long) v;
    }

    private long askLocked(long level) {
        long room = o.maxPrefetch - level - asked;
        if (room <= 0) {
            return 0;
        }
        long n = batchLocked();
        if (mode == RANGE) {
            if (lastGot > 0) {
                n = Math.min(n, Math.max(2 * lastGot, o.minBatch));
            }
            n = Math.min(n, c.maxRange.get());
        } else {
            n = Math.min(n, c.maxCount.get());
        }
        return Math.max(0, Math.min(n, room));
    }

    /**
     * topUpLocked starts refills until what the key holds plus what its
     * requests in flight should bring reaches the prefetch distance, at
     * most maxRefills at a time. A key whose strategy is not known yet is
     * probed with one request for one ID.
     */
    private void topUpLocked() {
        if (c.closed || retryPending) {
            return;
        }
        int m = mode;
        if (m == UNKNOWN) {
            if (inflight == 0) {
                inflight++;
                long ep = epoch;
                c.run(() -> refill(0, 0, ep, true));
            }
            return;
        }
        if (m != RANGE && m != BATCH) {
            return;
        }
        long now = System.nanoTime();
        long level = levelLocked();
        observeLocked(now, level);
        target = targetLocked();
        while (inflight < o.maxRefills && level + expected < target) {
            long ask = askLocked(level);
            if (ask <= 0) {
                return;
            }
            long exp = m == RANGE && lastGot > 0 ? Math.min(ask, lastGot) : ask;
            inflight++;
            asked += ask;
            expected += exp;
            long ep = epoch;
            c.run(() -> refill(ask, exp, ep, false));
        }
    }

    // ---- refills ----

    private void refill(long ask, long exp, long ep, boolean probe) {
        long t0 = System.nanoTime();
        long deadline = t0 + o.timeout.toNanos();
        Chunk got = null;
        IdsAnswer learned = null;
        IdmintException failed = null;
        long retryAt = 0;
        boolean fewer = false;
        try {
            if (probe) {
                learned = c.pool.call(name, leaderEndpoint(), deadline, e -> ids(e, 1, ep));
            } else if (mode == RANGE) {
                long[] r = c.pool.call(name, null, deadline, e -> range(e, ask, ep));
                got = new Chunk(r[0], r[1], null);
            } else {
                IdsAnswer a = c.pool.call(name, null, deadline, e -> ids(e, (int) ask, ep));
                if (a.isText()) {
                    failed = textError();
                } else {
                    got = new Chunk(0, a.ids.length, a.ids);
                }
            }
        } catch (Pool.AllFailed f) {
            failed = f.last != null ? f.last : new EndpointException(name, null, 0, null, null, true, "every endpoint is backing off after failures", 0, null);
            retryAt = f.retryAt;
        } catch (IdmintRequestException x) {
            if ("bad_count".equals(x.code()) && ask > 1) {
                fewer = (mode == RANGE ? c.maxRange : c.maxCount).accumulateAndGet(ask / 2, Math::min) >= 1;
            } else {
                failed = x;
            }
        } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
            failed = new IdmintClosedException(name);
        } catch (RuntimeException x) {
            failed = new EndpointException(name, null, 0, null, null, true, x.toString(), 0, x);
        }
        long now = System.nanoTime();
        mu.lock();
        try {
            inflight--;
            asked -= ask;
            expected -= exp;
            if (ep != epoch) {
                topUpLocked(); // a reset came meanwhile: the answer is a gap
                return;
            }
            if (failed != null) {
                refillErrors.incrementAndGet();
                failSeq++;
                lastErr = failed;
                if (!failed.retryable()) {
                    permErr = failed;
                    changed.signalAll();
                    return; // the next call that finds the buffer empty tries again
                }
                changed.signalAll();
                scheduleRetryLocked(Math.max(retryAt - now, TimeUnit.MILLISECONDS.toNanos(10)));
                return;
            }
            if (fewer) {
                topUpLocked();
                return;
            }
            lats[latN++ % LAT_WINDOW] = now - t0;
            long mx = 0;
            for (int i = 0; i < Math.min(latN, LAT_WINDOW); i++) {
                mx = Math.max(mx, lats[i]);
            }
            latMax = mx;
            refills.incrementAndGet();
            c.refills.incrementAndGet();
            lastErr = null;
            permErr = null;
            if (probe) {
                learnLocked(learned);
            } else {
                if (got.ids == null) {
                    lastGot = Math.max(got.n, lastGot / 2);
                }
                pushLocked(got);
            }
            changed.signalAll();
            topUpLocked();
        } finally {
            mu.unlock();
        }
    }

    private void scheduleRetryLocked(long delay) {
        if (retryPending || c.closed) {
            return;
        }
        retryPending = true;
        c.schedule(() -> {
            mu.lock();
            try {
                retryPending = false;
                if (!line.isEmpty() || levelLocked() + expected < target || mode == UNKNOWN) {
                    topUpLocked();
                }
            } finally {
                mu.unlock();
            }
        }, Math.min(delay, o.maxBackoff.toNanos()));
    }

    private void learnLocked(IdsAnswer a) {
        strategy = a.strategy;
        if (a.isText()) {
            mode = TEXT;
        } else if ("segment".equals(a.strategy)) {
            pushLocked(new Chunk(0, a.ids.length, a.ids));
            mode = RANGE;
        } else if ("snowflake".equals(a.strategy) || "ticket".equals(a.strategy) || "redis".equals(a.strategy)) {
            pushLocked(new Chunk(0, a.ids.length, a.ids));
            mode = BATCH;
        } else {
            // Monotonic and strategies this client does not know: never
            // prefetched. The probe's ID is a gap: handing it to a later
            // call could put it below IDs other clients got meanwhile.
            shared.ranged = "monotonic".equals(a.strategy);
            mode = DIRECT;
        }
    }

    private void pushLocked(Chunk ch) {
        if (ch.n == 0) {
            return;
        }
        supplied += ch.n;
        queued += ch.n;
        if (ch.ids == null) {
            // Ranges that arrive out of order are queued in increasing order.
            List<Chunk> tmp = new ArrayList<>(queue);
            int at = tmp.size();
            while (at > 0 && tmp.get(at - 1).ids == null && tmp.get(at - 1).first > ch.first) {
                at--;
            }
            tmp.add(at, ch);
            queue.clear();
            queue.addAll(tmp);
        } else {
            queue.addLast(ch);
        }
        if (cur.left() == 0) {
            promoteLocked();
        }
    }

    /** resetLocked drops what the key holds and forgets its strategy; calls in line keep their places. */
    private void resetLocked() {
        epoch++;
        queue.clear();
        queued = 0;
        cur = Chunk.EMPTY;
        mode = UNKNOWN;
        strategy = null;
        resets.incrementAndGet();
        changed.signalAll();
    }

    String strategy() {
        mu.lock();
        try {
            return strategy;
        } finally {
            mu.unlock();
        }
    }

    Endpoint leaderEndpoint() {
        String l = leader;
        if (l == null) {
            return null;
        }
        for (Endpoint e : c.pool.eps) {
            if (l.equals(e.node)) {
                return e;
            }
        }
        return null;
    }

    /**
     * heard records what an answer said: the key's leader, and its
     * strategy and generation on the answering endpoint. When the key
     * changed under the client (another strategy, or a new generation on
     * that endpoint: deleted and created again there) it drops the
     * buffer, and the key is learned anew; heard then returns true and the
     * answer's IDs must not be buffered. Answers to refills begun before
     * the latest reset are stale and change nothing.
     */
    boolean heard(Pool.Answer a, long ep) {
        if (a.leader() != null && !a.leader().equals(leader)) {
            leader = a.leader();
        }
        if (a.strategy() == null && a.generation() == null) {
            return false;
        }
        mu.lock();
        try {
            if (ep != ANY_EPOCH && ep != epoch) {
                return true;
            }
            boolean change = strategy != null && a.strategy() != null && !a.strategy().equals(strategy);
            int i = a.ep().idx;
            if (a.generation() != null) {
                change |= gens[i] != null && !gens[i].equals(a.generation());
                gens[i] = a.generation();
            }
            if (change) {
                resetLocked();
            }
            return change;
        } finally {
            mu.unlock();
        }
    }

    // ---- requests ----

    /** IdsAnswer is an /ids answer: numeric IDs, or text ones. */
    record IdsAnswer(String strategy, long[] ids, String[] text, boolean isText) {
    }

    CompletableFuture<long[]> range(Endpoint e, long n, long ep) {
        return c.pool.get(e, path + "/range?count=" + n, token, name).thenApply(a -> {
            boolean stale = heard(a, ep);
            if (a.status() != 200) {
                throw Pool.error(name, a);
            }
            long first, last, count;
            try {
                Map<String, Object> v = Json.object(a.body());
                first = Long.parseLong((String) v.get("first"));
                last = Long.parseLong((String) v.get("last"));
                count = ((Json.Num) v.get("count")).longValue();
                if (!name.equals(v.get("key")) || count < 1 || count > n || first > last || last - first + 1 != count) {
                    throw Pool.malformed(name, a, "key " + v.get("key") + ", first " + first + ", last " + last + ", count " + count + " for " + n + " asked");
                }
            } catch (IllegalArgumentException | ClassCastException | NullPointerException x) {
                throw Pool.malformed(name, a, x.toString());
            }
            if (stale && ep != ANY_EPOCH) {
                return new long[] {first, 0};
            }
            return new long[] {first, count};
        });
    }

    CompletableFuture<IdsAnswer> ids(Endpoint e, int n, long ep) {
        return c.pool.get(e, path + "/ids?count=" + n, token, name).thenApply(a -> {
            boolean stale = heard(a, ep);
            if (a.status() != 200) {
                throw Pool.error(name, a);
            }
            try {
                Map<String, Object> v = Json.object(a.body());
                Object s = v.get("strategy");
                Object list = v.get("ids");
                if (!name.equals(v.get("key")) || !(s instanceof String) || !(list instanceof List<?> l) || l.size() != n) {
                    throw Pool.malformed(name, a, "want key " + name + ", a strategy and " + n + " IDs");
                }
                String[] text = new String[n];
                for (int i = 0; i < n; i++) {
                    text[i] = (String) l.get(i);
                }
                long[] ids = new long[n];
                for (int i = 0; i < n; i++) {
                    try {
                        ids[i] = Long.parseLong(text[i]);
                    } catch (NumberFormatException x) {
                        if (i == 0) {
                            return new IdsAnswer((String) s, null, text, true);
                        }
                        throw Pool.malformed(name, a, x.toString());
                    }
                }
                if (stale && ep != ANY_EPOCH) {
                    return new IdsAnswer((String) s, new long[0], text, false);
                }
                return new IdsAnswer((String) s, ids, text, false);
            } catch (IllegalArgumentException | ClassCastException | NullPointerException x) {
                throw Pool.malformed(name, a, x.toString());
            }
        });
    }

    void wakeAll() {
        mu.lock();
        try {
            changed.signalAll();
        } finally {
            mu.unlock();
        }
        shared.wakeAll();
    }

    KeyStats stats() {
        mu.lock();
        try {
            return new KeyStats(name, strategy, mode == RANGE || mode == BATCH, levelLocked(), target, rate * 1e9,
                    inflight, refills.get(), refillErrors.get(), waits.get(), waitNanos.get(), waitMax.get(),
                    requests.get(), resets.get(), leader);
        } finally {
            mu.unlock();
        }
    }
}
