package dev.idmint.client;

import java.util.ArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Shared is the requests that the calls of a key that is not prefetched
 * (a monotonic key: strictly increasing across the cluster in real-time
 * order) share, and stay linearizable:
 *
 * <ul>
 * <li>A call joins the batch that is gathering. A batch is sealed and
 * sent when one of maxInFlight request slots is free, so a request
 * carries only calls that began before it was sent.</li>
 * <li>The answer is split among the batch's calls in the order they
 * joined; each call returns only after the answer came. So if call A
 * returned before call B began, B's request was sent after A's answer
 * arrived, and the server (linearizable itself) answered B above A.</li>
 * <li>A call that times out leaves its batch; the IDs meant for it are
 * gaps, never handed to a later call.</li>
 * </ul>
 *
 * Monotonic keys are asked for ranges (two numbers whatever the count),
 * other keys served this way for batches of IDs.
 */
final class Shared {
    private static final int WAITING = 0, SERVED = 1, GONE = 2;

    private final KeyState k;
    volatile boolean ranged;
    private Batch gather; // guarded by this
    private int inflight; // flushers running
    private int size = 4;

    Shared(KeyState k) {
        this.k = k;
    }

    private static final class Call {
        final long[] dst;
        final int from;
        int n; // written (by the sender; read after done)
        final AtomicInteger state = new AtomicInteger(WAITING);

        Call(long[] dst, int from) {
            this.dst = dst;
            this.from = from;
        }

        int want() {
            return dst.length - from;
        }
    }

    private static final class Batch {
        final ArrayList<Call> calls;
        final CountDownLatch done = new CountDownLatch(1);
        volatile IdmintException err;

        Batch(int cap) {
            calls = new ArrayList<>(cap);
        }
    }

    /** fill fills dst[from:] from a shared request sent after this call began. */
    void fill(long[] dst, int from, long deadline) {
        if (from == dst.length) {
            return;
        }
        Call cl = new Call(dst, from);
        Batch b;
        boolean start;
        synchronized (this) {
            b = gather;
            if (b == null) {
                b = new Batch(size);
                gather = b;
            }
            b.calls.add(cl);
            start = inflight < k.c.opts.maxInFlight;
            if (start) {
                inflight++;
            }
        }
        if (start) {
            // The call that takes a free slot sends its own batch on its
            // own thread: no hand-off to a sender thread and back, which on
            // a busy machine cost a scheduler wake-up each way. Batches
            // that gather meanwhile go on in the background.
            sendOwn();
        }
        try {
            if (!b.done.await(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                boolean left;
                synchronized (this) {
                    left = cl.state.compareAndSet(WAITING, GONE);
                }
                if (left) {
                    k.c.errors.incrementAndGet();
                    throw k.unavailable(b.err, "no IDs within " + k.c.opts.timeout.toMillis() + " ms");
                }
                b.done.await(); // the sender is writing this call's IDs: it ends soon
            }
        } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
            cl.state.compareAndSet(WAITING, GONE);
            throw new IdmintException(k.name, null, 0, null, null, true, "interrupted while waiting for IDs", x);
        }
        if (cl.n == cl.want()) {
            return;
        }
        k.c.errors.incrementAndGet();
        IdmintException e = b.err;
        if (e instanceof IdmintClosedException || k.c.closed) {
            throw new IdmintClosedException(k.name);
        }
        if (e != null && !e.retryable()) {
            throw new IdmintRequestException(k.name, e.endpoint(), e.status(), e.code(), e.field(), e.detail);
        }
        throw k.unavailable(e, "no IDs within " + k.c.opts.timeout.toMillis() + " ms");
    }

    /** sendOwn seals the gathering batch (the caller's) and sends it here, then leaves the rest to a flusher. */
    private void sendOwn() {
        Batch b;
        synchronized (this) {
            b = gather;
            gather = null;
            if (b == null) { // another sender took it already
                inflight--;
                return;
            }
            size = Math.max(4, (size + b.calls.size()) / 2);
        }
        try {
            send(b);
        } finally {
            boolean more;
            synchronized (this) {
                more = gather != null;
                if (!more) {
                    inflight--;
                }
            }
            if (more) {
                k.c.run(this::flush);
            }
        }
    }

    private void flush() {
        while (true) {
            Batch b;
            synchronized (this) {
                b = gather;
                gather = null;
                if (b == null) {
                    inflight--;
                    return;
                }
                size = Math.max(4, (size + b.calls.size()) / 2);
            }
            send(b);
        }
    }

    /**
     * send serves b's calls from requests sent now, retrying with backoff
     * until the client's timeout while any call still waits. Every
     * request is sent after every call of b began.
     */
    private void send(Batch b) {
        long deadline = System.nanoTime() + k.c.opts.timeout.toNanos();
        int i = 0; // the first call not yet full
        IdmintException err = null;
        long backoff = k.c.opts.minBackoff.toNanos() / 4 + 1;
        while (true) {
            long want = 0;
            for (int j = i; j < b.calls.size(); j++) {
                Call cl = b.calls.get(j);
                if (cl.state.get() != GONE) {
                    want += cl.want() - cl.n;
                }
            }
            if (want == 0) {
                break;
            }
            if (k.c.closed) {
                err = new IdmintClosedException(k.name);
                break;
            }
            long first = 0, count;
            long[] ids = null;
            try {
                if (ranged) {
                    long n = Math.min(want, k.c.maxRange.get());
                    long[] r = k.c.pool.call(k.name, k.leaderEndpoint(), deadline, e -> {
                        k.requests.incrementAndGet();
                        return k.range(e, n, KeyState.ANY_EPOCH);
                    });
                    first = r[0];
                    count = r[1];
                } else {
                    int n = (int) Math.min(want, k.c.maxCount.get());
                    KeyState.IdsAnswer a = k.c.pool.call(k.name, k.leaderEndpoint(), deadline, e -> {
                        k.requests.incrementAndGet();
                        return k.ids(e, n, KeyState.ANY_EPOCH);
                    });
                    if (a.isText()) {
                        err = k.textError();
                        break;
                    }
                    ids = a.ids();
                    count = ids.length;
                }
            } catch (Pool.AllFailed f) {
                err = f.last != null ? f.last : err;
                long now = System.nanoTime();
                if (deadline - now <= 0) {
                    break;
                }
                long wait = Math.min(Math.max(f.retryAt - now, backoff), deadline - now);
                backoff = Math.min(backoff * 2, k.c.opts.maxBackoff.toNanos());
                try {
                    TimeUnit.NANOSECONDS.sleep(wait); // a backoff between retries, not a wait for an event
                } catch (InterruptedException x) {
                    Thread.currentThread().interrupt();
                    break;
                }
                continue;
            } catch (IdmintRequestException x) {
                if ("bad_count".equals(x.code()) && want > 1) {
                    (ranged ? k.c.maxRange : k.c.maxCount).accumulateAndGet(Math.max(1, want / 2), Math::min);
                    continue;
                }
                err = x;
                break;
            } catch (InterruptedException x) {
                Thread.currentThread().interrupt();
                break;
            }
            // Split in the order the calls joined; a call that left gets
            // nothing (its share is a gap), and what is left over too.
            long pos = 0;
            while (pos < count && i < b.calls.size()) {
                Call cl = b.calls.get(i);
                if (cl.n == 0 && !cl.state.compareAndSet(WAITING, SERVED)) {
                    i++;
                    continue;
                }
                long m = Math.min(cl.want() - cl.n, count - pos);
                for (long j = 0; j < m; j++) {
                    cl.dst[cl.from + cl.n + (int) j] = ids != null ? ids[(int) (pos + j)] : first + pos + j;
                }
                cl.n += (int) m;
                pos += m;
                if (cl.n == cl.want()) {
                    i++;
                }
            }
        }
        b.err = err;
        b.done.countDown();
    }

    void wakeAll() {
        // Batches end at their own deadline; flushers see closed.
    }
}
