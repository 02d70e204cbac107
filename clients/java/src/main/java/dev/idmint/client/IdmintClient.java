package dev.idmint.client;

import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;

/**
 * IdmintClient draws IDs from idmint servers over HTTP.
 *
 * <pre>{@code
 * try (IdmintClient c = IdmintClient.builder("http://id1:8080", "http://id2:8080").token("s3cret").build()) {
 *     long id = c.next("order");
 * }
 * }</pre>
 *
 * <p><b>Prefetch.</b> The first call for a key asks for one ID and learns
 * the key's strategy from the answer. Segment keys are then buffered as
 * ranges ({@code /v1/keys/{key}/range}), snowflake, ticket and redis keys
 * as batches ({@code /v1/keys/{key}/ids}). {@link #next(String)} takes an
 * ID from the current range with one atomic add and no lock. In the
 * background the client keeps a prefetch distance of IDs held or asked
 * for: draw rate × (2 × refill latency + hedgeAfter), between minBatch and
 * maxPrefetch, so it grows with the draw and is bounded in memory.
 *
 * <p><b>Monotonic keys are never prefetched.</b> Every call gets IDs from
 * a request sent after the call began (concurrent calls share one), so an
 * ID returned before a call began is below every ID of that call,
 * whichever node answered either. Requests go to the key's leader first.
 *
 * <p><b>Failover.</b> Requests rotate over healthy endpoints; a failure
 * moves to the next at once; a request without an answer after hedgeAfter
 * is also sent to another endpoint; after breakerThreshold consecutive
 * failures an endpoint rests for a backoff doubling from minBackoff to
 * maxBackoff. A call that cannot be served within timeout throws
 * {@link IdmintUnavailableException}; a refusal of the request itself
 * (401, 403, unknown key) throws {@link IdmintRequestException} at once.
 *
 * <p>The client is thread-safe; build one per process and share it.
 * IDs one client returns for a key are unique. {@link #close()} stops its
 * background work; IDs it held are gaps, never reissued.
 */
public final class IdmintClient implements AutoCloseable {
    final Builder opts;
    final Pool pool;
    private final ConcurrentHashMap<String, KeyState> keys = new ConcurrentHashMap<>();
    private volatile KeyState last;
    volatile boolean closed;
    private final ExecutorService exec;
    private final ScheduledExecutorService sched;
    final AtomicLong maxCount, maxRange;
    final AtomicLong waits = new AtomicLong(), refills = new AtomicLong(), errors = new AtomicLong();

    private IdmintClient(Builder b) {
        this.opts = b;
        HttpClient.Builder hb = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(b.attemptTimeout);
        if (b.sslContext != null) {
            hb.sslContext(b.sslContext);
        }
        ThreadFactory tf = daemons("idmint-client");
        exec = Executors.newCachedThreadPool(tf);
        sched = Executors.newSingleThreadScheduledExecutor(daemons("idmint-client-backoff"));
        hb.executor(exec);
        pool = new Pool(b.endpoints, b, hb.build());
        maxCount = new AtomicLong(b.maxCount);
        maxRange = new AtomicLong(b.maxBatch);
    }

    private static ThreadFactory daemons(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /** builder starts a client of the given endpoints (http:// or https://). */
    public static Builder builder(String... endpoints) {
        return new Builder(List.of(endpoints));
    }

    /** builder starts a client of the given endpoints (http:// or https://). */
    public static Builder builder(List<String> endpoints) {
        return new Builder(List.copyOf(endpoints));
    }

    void run(Runnable r) {
        try {
            exec.execute(r);
        } catch (RejectedExecutionException closing) {
            // closed: background work stops
        }
    }

    void schedule(Runnable r, long nanos) {
        try {
            sched.schedule(r, nanos, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException closing) {
            // closed
        }
    }

    KeyState key(String name) {
        KeyState k = last;
        if (k != null && (k.name == name || k.name.equals(name))) {
            return k;
        }
        if (name == null) {
            checkName(null); // throws: ConcurrentHashMap refuses a null key with a bare NullPointerException
        }
        k = keys.get(name);
        if (k == null) {
            checkName(name);
            k = keys.computeIfAbsent(name, n -> new KeyState(this, n, opts.tokens.getOrDefault(n, opts.token)));
        }
        last = k;
        return k;
    }

    /**
     * checkName mirrors the server's key-name rule: letters and digits,
     * then also . _ : -, at most 128 bytes.
     */
    static void checkName(String s) {
        String why = null;
        if (s == null || s.isEmpty()) {
            why = "must not be empty";
        } else if (s.getBytes(StandardCharsets.UTF_8).length > 128) {
            why = "longer than 128 bytes";
        } else {
            for (int i = 0; i < s.length(); ) {
                int r = s.codePointAt(i);
                if (!(Character.isLetterOrDigit(r) || (i > 0 && (r == '.' || r == '_' || r == ':' || r == '-')))) {
                    why = "character '" + new String(Character.toChars(r)) + "' at " + i + " is not allowed (letters, digits, . _ : - only)";
                    break;
                }
                i += Character.charCount(r);
            }
        }
        if (why != null) {
            throw new IdmintRequestException(s, null, 0, "bad_key", "key", "key " + (s == null ? "null" : "\"" + s + "\"") + ": " + why);
        }
    }

    private void open(String key) {
        if (closed) {
            throw new IdmintClosedException(key);
        }
    }

    /**
     * next returns one new ID of key. Served from the buffer it costs one
     * atomic add and allocates nothing; otherwise it waits for a refill,
     * at most timeout. IDs of a segment key increase within one refill.
     *
     * @throws IdmintUnavailableException no endpoint issued within timeout
     * @throws IdmintRequestException the key is unknown, refused (token), or issues text
     * @throws IdmintClosedException after close
     */
    public long next(String key) {
        open(key);
        return key(key).next();
    }

    /** next fills dst with new IDs of key; as {@link #next(String)}. */
    public void next(String key, long[] dst) {
        open(key);
        key(key).nextN(dst);
    }

    /** source returns a handle that draws IDs of key without a lookup per call. */
    public IdSource source(String key) {
        open(key);
        return new IdSource(this, key(key));
    }

    /**
     * nextString returns one new ID of key as text: for keys whose IDs are
     * text (UUID family, ULID, KSUID, order numbers) and numeric keys
     * alike. Each call sends a request (failover and hedging as for
     * refills): text IDs are not prefetched.
     */
    public String nextString(String key) {
        return nextStrings(key, 1).get(0);
    }

    /** nextStrings returns n new IDs of key as text, from one request when n fits in maxCount. */
    public List<String> nextStrings(String key, int n) {
        open(key);
        if (n < 1 || n > opts.maxCount) {
            throw new IdmintRequestException(key, null, 0, "bad_count", "count", "count " + n + ": want 1 to " + opts.maxCount);
        }
        KeyState k = key(key);
        long deadline = System.nanoTime() + opts.timeout.toNanos();
        KeyState.IdsAnswer a = retrying(key, deadline, prefer -> pool.call(key, k.leaderEndpoint(), deadline, e -> {
            k.requests.incrementAndGet();
            return k.ids(e, n, KeyState.ANY_EPOCH);
        }));
        return List.of(a.text());
    }

    /** decode returns the parts of id as the servers' decode route reads them (idmint's own layouts). */
    public Decoded decode(long id) {
        return decode(Long.toString(id), null, null);
    }

    /**
     * decode returns the parts of id, read with the named layout (or that
     * of key); either may be null. This replaces uid-generator's
     * parseUID.
     */
    public Decoded decode(String id, String layout, String key) {
        open(key);
        StringBuilder p = new StringBuilder("/v1/decode/").append(URLEncoder.encode(id, StandardCharsets.UTF_8));
        String sep = "?";
        if (layout != null) {
            p.append(sep).append("layout=").append(URLEncoder.encode(layout, StandardCharsets.UTF_8));
            sep = "&";
        }
        if (key != null) {
            p.append(sep).append("key=").append(URLEncoder.encode(key, StandardCharsets.UTF_8));
        }
        String path = p.toString();
        String token = key == null ? opts.token : opts.tokens.getOrDefault(key, opts.token);
        long deadline = System.nanoTime() + opts.timeout.toNanos();
        return retrying(key, deadline, prefer -> pool.call(key, null, deadline, e -> pool.get(e, path, token, key).thenApply(a -> {
            if (a.status() != 200) {
                throw Pool.error(key, a);
            }
            try {
                Map<String, Object> v = new LinkedHashMap<>(Json.object(a.body()));
                Object t = v.remove("time");
                Object ms = v.remove("unix_ms");
                Object node = v.remove("node");
                Object seq = v.remove("sequence");
                return new Decoded((String) v.remove("id"), (String) v.remove("layout"),
                        t instanceof String s ? Instant.parse(s) : null,
                        ms instanceof String s ? Long.parseLong(s) : 0,
                        node instanceof Json.Num nn ? nn.longValue() : 0,
                        seq instanceof Json.Num sn ? sn.longValue() : 0, Map.copyOf(plain(v)));
            } catch (RuntimeException x) {
                throw Pool.malformed(key, a, x.toString());
            }
        })));
    }

    private static Map<String, Object> plain(Map<String, Object> v) {
        Map<String, Object> out = new TreeMap<>();
        v.forEach((k, x) -> {
            if (x != null) {
                out.put(k, x instanceof Json.Num n ? n.text() : x);
            }
        });
        return out;
    }

    private interface Attempt<T> {
        T run(Endpoint prefer) throws Pool.AllFailed, InterruptedException;
    }

    /** retrying runs a request with failover, and again after backoffs, until deadline. */
    private <T> T retrying(String key, long deadline, Attempt<T> a) {
        IdmintException last = null;
        try {
            while (true) {
                if (closed) {
                    throw new IdmintClosedException(key);
                }
                try {
                    return a.run(null);
                } catch (Pool.AllFailed f) {
                    last = f.last != null ? f.last : last;
                    long now = System.nanoTime();
                    if (deadline - now <= 0) {
                        break;
                    }
                    TimeUnit.NANOSECONDS.sleep(Math.min(Math.max(f.retryAt - now, TimeUnit.MILLISECONDS.toNanos(10)), deadline - now));
                }
            }
        } catch (InterruptedException x) {
            Thread.currentThread().interrupt();
        } catch (IdmintException x) {
            errors.incrementAndGet();
            throw x;
        }
        errors.incrementAndGet();
        String msg = "no answer within " + opts.timeout.toMillis() + " ms";
        if (last != null) {
            msg += "; last failure: " + last.getMessage();
        }
        throw new IdmintUnavailableException(key, last, msg);
    }

    /** buffered is how many IDs of key the client holds. */
    public long buffered(String key) {
        KeyState k = keys.get(key);
        return k == null ? 0 : k.buffered();
    }

    /** stats returns the client's counters: waits, refills, failovers, hedges, errors, per key and per endpoint. */
    public Stats stats() {
        Map<String, KeyStats> ks = new TreeMap<>();
        for (KeyState k : keys.values()) {
            ks.put(k.name, k.stats());
        }
        List<EndpointStats> es = new ArrayList<>();
        long now = System.nanoTime();
        for (Endpoint e : pool.eps) {
            es.add(new EndpointStats(e.url, e.node, e.up(now, opts.breakerThreshold), e.requests.get(), e.failures.get()));
        }
        return new Stats(waits.get(), refills.get(), pool.failovers.get(), pool.hedges.get(), errors.get(), ks, es);
    }

    /**
     * close stops the background work. Calls waiting for IDs throw
     * {@link IdmintClosedException}; so do calls after close. It is
     * idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (KeyState k : keys.values()) {
            k.wakeAll();
        }
        sched.shutdownNow();
        exec.shutdown();
    }

    /**
     * Builder configures an IdmintClient. Every setting has a default;
     * {@link #build()} checks them all and names the setting and value it
     * refuses.
     */
    public static final class Builder {
        final List<String> endpoints;
        String token;
        Map<String, String> tokens = Map.of();
        SSLContext sslContext;
        Duration timeout = Duration.ofSeconds(10);
        Duration attemptTimeout = Duration.ofSeconds(3);
        Duration hedgeAfter = Duration.ofMillis(200);
        Duration refillEvery = Duration.ofSeconds(2);
        long minBatch = 100, maxBatch = 1_000_000, maxPrefetch = 0;
        int maxRefills = 8, maxCount = 10_000, maxInFlight = 2, breakerThreshold = 2;
        Duration minBackoff = Duration.ofMillis(100), maxBackoff = Duration.ofSeconds(10);

        private Builder(List<String> endpoints) {
            this.endpoints = endpoints;
        }

        /** token is sent as "Authorization: Bearer token" with every request. Default none. */
        public Builder token(String token) {
            this.token = token;
            return this;
        }

        /** tokens overrides token for the keys it names. */
        public Builder tokens(Map<String, String> tokens) {
            this.tokens = Map.copyOf(tokens);
            return this;
        }

        /** sslContext configures https:// endpoints. Default: the JDK's default context (its trust store). */
        public Builder sslContext(SSLContext ctx) {
            this.sslContext = ctx;
            return this;
        }

        /** timeout bounds a call. Default 10 s. */
        public Builder timeout(Duration d) {
            this.timeout = d;
            return this;
        }

        /** attemptTimeout bounds one request to one endpoint (and its connect). Default 3 s. */
        public Builder attemptTimeout(Duration d) {
            this.attemptTimeout = d;
            return this;
        }

        /** hedgeAfter: a request unanswered this long is also sent to another endpoint. Default 200 ms; negative: never. */
        public Builder hedgeAfter(Duration d) {
            this.hedgeAfter = d;
            return this;
        }

        /** refillEvery: one refill asks for what the draw takes in this long. Default 2 s. */
        public Builder refillEvery(Duration d) {
            this.refillEvery = d;
            return this;
        }

        /** minBatch and maxBatch bound the IDs one refill asks for. Defaults 100 and 1,000,000. */
        public Builder batch(long min, long max) {
            this.minBatch = min;
            this.maxBatch = max;
            return this;
        }

        /**
         * maxPrefetch bounds the IDs of one key held plus asked for by
         * refills in flight; a process that exits loses at most that many
         * (gaps). Batch keys' IDs cost 8 bytes each while held, ranges
         * nothing. Default 4 × maxBatch.
         */
        public Builder maxPrefetch(long n) {
            this.maxPrefetch = n;
            return this;
        }

        /** maxRefills: refill requests of one key in flight at once. Default 8. */
        public Builder maxRefills(int n) {
            this.maxRefills = n;
            return this;
        }

        /** maxCount: the most IDs one /ids request asks for (the servers' max_count). Default 10,000. */
        public Builder maxCount(int n) {
            this.maxCount = n;
            return this;
        }

        /** maxInFlight: shared requests of one monotonic key in flight at once. Default 2. */
        public Builder maxInFlight(int n) {
            this.maxInFlight = n;
            return this;
        }

        /** breakerThreshold: consecutive failures that open an endpoint's breaker. Default 2. */
        public Builder breakerThreshold(int n) {
            this.breakerThreshold = n;
            return this;
        }

        /** backoff bounds how long an open breaker keeps an endpoint out. Defaults 100 ms and 10 s. */
        public Builder backoff(Duration min, Duration max) {
            this.minBackoff = min;
            this.maxBackoff = max;
            return this;
        }

        /** build checks every setting and starts the client. */
        public IdmintClient build() {
            if (maxPrefetch == 0) {
                maxPrefetch = 4 * Math.max(maxBatch, minBatch);
            }
            if (endpoints.isEmpty()) {
                throw bad("endpoints", "[]", "want at least one");
            }
            for (String e : endpoints) {
                URI u;
                try {
                    u = URI.create(e);
                } catch (IllegalArgumentException x) {
                    throw bad("endpoints", e, "not a URL: " + x.getMessage());
                }
                if (!("http".equals(u.getScheme()) || "https".equals(u.getScheme())) || u.getHost() == null
                        || u.getRawQuery() != null || u.getRawFragment() != null) {
                    throw bad("endpoints", e, "want http://host:port or https://host:port, without a query or fragment");
                }
            }
            positive("timeout", timeout);
            positive("attemptTimeout", attemptTimeout);
            positive("refillEvery", refillEvery);
            positive("minBackoff", minBackoff);
            if (hedgeAfter == null) {
                throw bad("hedgeAfter", "null", "want a duration (negative: never hedge)");
            }
            if (maxBackoff == null || maxBackoff.compareTo(minBackoff) < 0) {
                throw bad("maxBackoff", maxBackoff, "must be at least minBackoff (" + minBackoff + ")");
            }
            if (minBatch < 1) {
                throw bad("minBatch", minBatch, "must be at least 1");
            }
            if (maxBatch < minBatch || maxBatch > (1L << 30)) {
                throw bad("maxBatch", maxBatch, "must be between minBatch (" + minBatch + ") and 2^30");
            }
            if (maxPrefetch < minBatch || maxPrefetch > (1L << 32)) {
                throw bad("maxPrefetch", maxPrefetch, "must be between minBatch (" + minBatch + ") and 2^32");
            }
            if (maxRefills < 1 || maxRefills > 64) {
                throw bad("maxRefills", maxRefills, "must be between 1 and 64");
            }
            if (maxCount < 1 || maxCount > 1_000_000) {
                throw bad("maxCount", maxCount, "must be between 1 and 1000000 (the servers' max_count range)");
            }
            if (maxInFlight < 1 || maxInFlight > 64) {
                throw bad("maxInFlight", maxInFlight, "must be between 1 and 64");
            }
            if (breakerThreshold < 1) {
                throw bad("breakerThreshold", breakerThreshold, "must be at least 1");
            }
            for (String k : tokens.keySet()) {
                checkName(k);
            }
            Builder copy = new Builder(List.copyOf(endpoints.stream().map(e -> e.replaceAll("/+$", "")).toList()));
            copy.token = token;
            copy.tokens = new HashMap<>(tokens);
            copy.sslContext = sslContext;
            copy.timeout = timeout;
            copy.attemptTimeout = attemptTimeout;
            copy.hedgeAfter = hedgeAfter;
            copy.refillEvery = refillEvery;
            copy.minBatch = minBatch;
            copy.maxBatch = maxBatch;
            copy.maxPrefetch = maxPrefetch;
            copy.maxRefills = maxRefills;
            copy.maxCount = maxCount;
            copy.maxInFlight = maxInFlight;
            copy.breakerThreshold = breakerThreshold;
            copy.minBackoff = minBackoff;
            copy.maxBackoff = maxBackoff;
            return new IdmintClient(copy);
        }

        private void positive(String field, Duration d) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw bad(field, d, "must be positive");
            }
        }

        private static IllegalArgumentException bad(String field, Object v, String why) {
            return new IllegalArgumentException("idmint: Builder." + field + ": " + v + ": " + why);
        }
    }

    static CompletableFuture<Void> done() {
        return CompletableFuture.completedFuture(null);
    }
}
