package dev.idmint.client;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Endpoint is one server and its circuit breaker. The breaker's state is
 * guarded by the endpoint's monitor; no caller holds it while it waits
 * for anything.
 */
final class Endpoint {
    final String url; // without a trailing slash
    final int idx;
    volatile String node; // the name its answers give (Idmint-Node), null until one did

    private int fails; // consecutive retryable failures
    private long openUntil; // System.nanoTime() the breaker stays open until
    private boolean probing; // a half-open probe is in flight
    private IdmintException lastErr;

    final AtomicLong requests = new AtomicLong();
    final AtomicLong failures = new AtomicLong();

    Endpoint(String url, int idx) {
        this.url = url;
        this.idx = idx;
    }

    /** 0: closed (may be tried); 1: half-open (one probe may go); 2: open. */
    synchronized int state(long now, int threshold) {
        if (now - openUntil < 0) {
            return 2;
        }
        if (fails < threshold) {
            return 0;
        }
        return probing ? 2 : 1;
    }

    synchronized long openUntil() {
        return openUntil;
    }

    synchronized void startAttempt(int threshold) {
        if (fails >= threshold) {
            probing = true;
        }
    }

    synchronized boolean up(long now, int threshold) {
        return now - openUntil >= 0 && fails < threshold;
    }

    synchronized IdmintException lastErr() {
        return lastErr;
    }

    /** endProbe ends a probe without judging the endpoint. */
    synchronized void endProbe() {
        probing = false;
    }

    synchronized void success() {
        fails = 0;
        openUntil = 0;
        probing = false;
        lastErr = null;
    }

    /**
     * failure counts a retryable failure; from threshold consecutive ones
     * on, the endpoint is left alone for a backoff doubling from min to
     * max with ±20 % jitter, and never for less than the server's
     * Retry-After.
     */
    void failure(IdmintException err, long now, int threshold, long minBackoff, long maxBackoff) {
        failures.incrementAndGet();
        long ra = err instanceof EndpointException ee ? ee.retryAfterNanos : 0;
        synchronized (this) {
            fails++;
            probing = false;
            lastErr = err;
            long back = 0;
            if (fails >= threshold) {
                int shift = Math.min(fails - threshold, 20);
                back = Math.min(maxBackoff, minBackoff << shift);
                if (back < 0) {
                    back = maxBackoff;
                }
                back = back * 4 / 5 + ThreadLocalRandom.current().nextLong(back * 2 / 5 + 1);
            }
            if (ra > 0) {
                back = Math.max(back, Math.min(ra, maxBackoff));
            }
            if (back > 0 && now + back - openUntil > 0) {
                openUntil = now + back;
            }
        }
    }
}
