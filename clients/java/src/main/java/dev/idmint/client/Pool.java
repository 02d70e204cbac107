package dev.idmint.client;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;

/**
 * Pool sends requests to the endpoints with failover, hedging and a
 * circuit breaker per endpoint, over the JDK's HTTP client.
 */
final class Pool {
    final Endpoint[] eps;
    final IdmintClient.Builder opts;
    final HttpClient http;
    private final AtomicInteger rr = new AtomicInteger();
    final AtomicLong failovers = new AtomicLong();
    final AtomicLong hedges = new AtomicLong();

    Pool(List<String> urls, IdmintClient.Builder opts, HttpClient http) {
        this.opts = opts;
        this.http = http;
        eps = new Endpoint[urls.size()];
        for (int i = 0; i < eps.length; i++) {
            eps[i] = new Endpoint(urls.get(i), i);
        }
    }

    /** An answer of an idmint node: its status, body and headers. */
    record Answer(Endpoint ep, int status, String body, String node, String strategy, String generation, String leader, long retryAfterNanos) {
    }

    /** Every endpoint tried failed, or none may be tried before retryAt (nanoTime). */
    static final class AllFailed extends Exception {
        private static final long serialVersionUID = 1L;
        final transient IdmintException last;
        final long retryAt;
        final int tried;

        AllFailed(IdmintException last, long retryAt, int tried) {
            super(null, null, false, false);
            this.last = last;
            this.retryAt = retryAt;
            this.tried = tried;
        }
    }

    /** get sends GET base+path to e; the future completes with its answer, whatever the status. */
    CompletableFuture<Answer> get(Endpoint e, String path, String token, String key) {
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(e.url + path)).timeout(opts.attemptTimeout).GET();
        if (token != null && !token.isEmpty()) {
            rb.header("Authorization", "Bearer " + token);
        }
        e.requests.incrementAndGet();
        return http.sendAsync(rb.build(), HttpResponse.BodyHandlers.ofString()).handle((resp, err) -> {
            if (err != null) {
                Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
                String what = c instanceof HttpTimeoutException ? "no answer within " + opts.attemptTimeout.toMillis() + " ms" : c.toString();
                throw new EndpointException(key, e.url, 0, null, null, true, what, 0, c);
            }
            var h = resp.headers();
            String node = h.firstValue("Idmint-Node").orElse(null);
            if (node != null && !node.equals(e.node)) {
                e.node = node;
            }
            return new Answer(e, resp.statusCode(), resp.body(), node, h.firstValue("Idmint-Strategy").orElse(null),
                    h.firstValue("Idmint-Key-Generation").orElse(null), h.firstValue("Idmint-Leader").orElse(null),
                    retryAfter(h.firstValue("Retry-After").orElse(null)));
        });
    }

    static long retryAfter(String v) {
        if (v == null) {
            return 0;
        }
        try {
            long s = Long.parseLong(v.trim());
            return s > 0 ? TimeUnit.SECONDS.toNanos(Math.min(s, 3600)) : 0;
        } catch (NumberFormatException x) {
            return 0; // an HTTP date: ignored, the breaker's own backoff applies
        }
    }

    /**
     * error classifies an answer that is not 200 as httpError in the Go
     * client does: 400, 401, 403, 413 and a 404 naming an unknown key are
     * the request's fault and permanent; everything else is retryable.
     */
    static EndpointException error(String key, Answer a) {
        String code = null, message = null, field = null;
        try {
            Object err = Json.object(a.body()).get("error");
            if (err instanceof Map<?, ?> m) {
                code = str(m.get("code"));
                message = str(m.get("message"));
                field = str(m.get("field"));
            }
        } catch (IllegalArgumentException notJson) {
            // described below
        }
        if (code == null) {
            String b = a.body() == null ? "" : a.body();
            message = "HTTP " + a.status() + ": \"" + (b.length() > 200 ? b.substring(0, 200) + "..." : b) + "\"";
        }
        int s = a.status();
        boolean permanent = s == 400 || s == 401 || s == 403 || s == 413 || (s == 404 && "unknown_key".equals(code));
        return new EndpointException(key, a.ep().url, s, code, field, !permanent, message, a.retryAfterNanos(), null);
    }

    static EndpointException malformed(String key, Answer a, String why) {
        String b = a.body();
        if (b.length() > 200) {
            b = b.substring(0, 200) + "...";
        }
        return new EndpointException(key, a.ep().url, a.status(), null, null, true, "malformed answer: " + why + " in \"" + b + "\"", 0, null);
    }

    private static String str(Object o) {
        return o instanceof String s ? s : null;
    }

    /**
     * pick returns the endpoints to try, in order: prefer first when it
     * may be tried (a key's leader), then half-open ones (one probe each),
     * then closed ones from a rotating index. When none may be tried,
     * retryAt[0] is the soonest end of a backoff.
     */
    List<Endpoint> pick(Endpoint prefer, long[] retryAt) {
        long now = System.nanoTime();
        int n = eps.length;
        int start = Math.floorMod(rr.getAndIncrement(), n);
        List<Endpoint> half = new ArrayList<>(n), closed = new ArrayList<>(n);
        Endpoint first = null;
        long soonest = Long.MAX_VALUE;
        for (int i = 0; i < n; i++) {
            Endpoint e = eps[(start + i) % n];
            int st = e.state(now, opts.breakerThreshold);
            if (e == prefer && st < 2) {
                first = e;
            } else if (st == 0) {
                closed.add(e);
            } else if (st == 1) {
                half.add(e);
            } else {
                long at = e.openUntil();
                if (at - now <= 0) {
                    at = now + opts.minBackoff.toNanos(); // a probe is in flight: look again soon
                }
                soonest = Math.min(soonest, at);
            }
        }
        List<Endpoint> order = new ArrayList<>(n);
        if (first != null) {
            order.add(first);
        }
        order.addAll(half);
        order.addAll(closed);
        retryAt[0] = soonest == Long.MAX_VALUE ? now + opts.minBackoff.toNanos() : soonest;
        return order;
    }

    IdmintException lastFailure() {
        for (Endpoint e : eps) {
            IdmintException x = e.lastErr();
            if (x != null) {
                return x;
            }
        }
        return null;
    }

    private record Result<T>(Endpoint ep, long started, T value, Throwable err) {
    }

    /**
     * call runs op against endpoints until one succeeds or deadline
     * (nanoTime) passes: a retryable failure moves on to the next endpoint
     * at once (a failover), an attempt still unanswered after hedgeAfter
     * is joined by one on the next endpoint (a hedge); the first success
     * wins. A permanent failure is thrown at once as an
     * IdmintRequestException; when every endpoint tried failed, or none
     * may be tried, AllFailed.
     */
    <T> T call(String key, Endpoint prefer, long deadline, Function<Endpoint, CompletableFuture<T>> op) throws AllFailed, InterruptedException {
        long[] retryAt = new long[1];
        List<Endpoint> order = pick(prefer, retryAt);
        if (order.isEmpty()) {
            throw new AllFailed(lastFailure(), retryAt[0], 0);
        }
        LinkedBlockingQueue<Result<T>> results = new LinkedBlockingQueue<>();
        List<Result<T>> running = new ArrayList<>(order.size());
        int next = 0;
        long hedgeNanos = opts.hedgeAfter.isNegative() ? -1 : opts.hedgeAfter.toNanos();
        IdmintException last = null;
        next = launch(order, next, running, results, op);
        long hedgeAt = hedgeNanos >= 0 && next < order.size() ? System.nanoTime() + hedgeNanos : Long.MAX_VALUE;
        while (!running.isEmpty()) {
            long now = System.nanoTime();
            long until = Math.min(hedgeAt, deadline);
            Result<T> r = until - now > 0 ? results.poll(until - now, TimeUnit.NANOSECONDS) : results.poll();
            if (r == null) {
                now = System.nanoTime();
                if (deadline - now <= 0) {
                    for (Result<T> a : running) {
                        a.ep().endProbe();
                    }
                    throw new AllFailed(last, now, next);
                }
                if (hedgeAt - now <= 0) {
                    hedges.incrementAndGet();
                    next = launch(order, next, running, results, op);
                    hedgeAt = next < order.size() ? now + hedgeNanos : Long.MAX_VALUE;
                }
                continue;
            }
            running.removeIf(a -> a.ep() == r.ep());
            if (r.err() == null) {
                r.ep().success();
                now = System.nanoTime();
                for (Result<T> a : running) {
                    if (hedgeNanos >= 0 && now - a.started() >= hedgeNanos) {
                        a.ep().failure(new EndpointException(key, a.ep().url, 0, null, null, true, "slower than the hedge threshold " + opts.hedgeAfter.toMillis() + " ms", 0, null),
                                now, opts.breakerThreshold, opts.minBackoff.toNanos(), opts.maxBackoff.toNanos());
                    } else {
                        a.ep().endProbe();
                    }
                }
                return r.value();
            }
            IdmintException x = asIdmint(key, r.ep(), r.err());
            if (!x.retryable()) {
                r.ep().endProbe();
                throw new IdmintRequestException(x.key(), x.endpoint(), x.status(), x.code(), x.field(), x.detail);
            }
            r.ep().failure(x, System.nanoTime(), opts.breakerThreshold, opts.minBackoff.toNanos(), opts.maxBackoff.toNanos());
            last = x;
            if (next < order.size()) {
                failovers.incrementAndGet();
                next = launch(order, next, running, results, op);
                hedgeAt = hedgeNanos >= 0 && next < order.size() ? System.nanoTime() + hedgeNanos : Long.MAX_VALUE;
            }
        }
        pick(null, retryAt);
        throw new AllFailed(last, retryAt[0], next);
    }

    private <T> int launch(List<Endpoint> order, int next, List<Result<T>> running, LinkedBlockingQueue<Result<T>> results, Function<Endpoint, CompletableFuture<T>> op) {
        Endpoint e = order.get(next);
        e.startAttempt(opts.breakerThreshold);
        long started = System.nanoTime();
        running.add(new Result<>(e, started, null, null));
        CompletableFuture<T> f;
        try {
            f = op.apply(e);
        } catch (RuntimeException x) {
            f = CompletableFuture.failedFuture(x);
        }
        f.whenComplete((v, err) -> results.add(new Result<>(e, started, v, err)));
        return next + 1;
    }

    static IdmintException asIdmint(String key, Endpoint e, Throwable err) {
        Throwable c = err;
        while (c instanceof CompletionException && c.getCause() != null) {
            c = c.getCause();
        }
        if (c instanceof IdmintException x) {
            return x;
        }
        return new EndpointException(key, e.url, 0, null, null, true, c.toString(), 0, c);
    }

    static Duration nanos(long n) {
        return Duration.ofNanos(n);
    }
}
