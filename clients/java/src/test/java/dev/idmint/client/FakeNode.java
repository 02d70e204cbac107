package dev.idmint.client;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import javax.net.ssl.SSLContext;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicLong;

/**
 * FakeNode is an idmint node in the JVM (com.sun.net.httpserver): it
 * serves /v1/keys/{key}/ids, /range and /v1/decode for keys whose
 * counters it may share with other fake nodes, and can be told to fail
 * in the ways real nodes fail.
 */
final class FakeNode implements AutoCloseable {
    enum Mode { OK, ERROR_500, GARBAGE, HANG, RATE_LIMITED }

    /** Counters shared by the fake nodes of one cluster: key -> next ID. */
    static final class Cluster {
        final Map<String, AtomicLong> counters = new ConcurrentHashMap<>();
        final Map<String, String> strategies = new ConcurrentHashMap<>();

        Cluster key(String key, String strategy) {
            strategies.put(key, strategy);
            counters.put(key, new AtomicLong(1));
            return this;
        }
    }

    final String name;
    final Cluster cluster;
    final HttpServer server;
    private final boolean tls;
    private final ExecutorService pool = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "fake-node");
        t.setDaemon(true);
        return t;
    });
    volatile Mode mode = Mode.OK;
    volatile String generation = "g1";
    volatile String leader;
    volatile long rangeLimit = Long.MAX_VALUE; // a segment's end: range answers bring at most this many
    final Map<String, String> tokens = new ConcurrentHashMap<>();
    final AtomicLong requests = new AtomicLong(), rangeRequests = new AtomicLong(), idsRequests = new AtomicLong();
    final Map<String, String> lastAuth = new ConcurrentHashMap<>();
    private final CountDownLatch released = new CountDownLatch(1);

    FakeNode(String name, Cluster cluster) throws IOException {
        this(name, cluster, null);
    }

    /** FakeNode with tls set serves HTTPS with that context. */
    FakeNode(String name, Cluster cluster, SSLContext tls) throws IOException {
        this.name = name;
        this.cluster = cluster;
        this.tls = tls != null;
        if (tls != null) {
            HttpsServer hs = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
            hs.setHttpsConfigurator(new HttpsConfigurator(tls));
            server = hs;
        } else {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
        }
        server.createContext("/", this::handle);
        server.setExecutor(pool);
        server.start();
    }

    String url() {
        return (tls ? "https" : "http") + "://127.0.0.1:" + server.getAddress().getPort();
    }

    @Override
    public void close() {
        released.countDown();
        server.stop(0);
        pool.shutdownNow();
    }

    private void handle(HttpExchange x) throws IOException {
        try (x) {
            requests.incrementAndGet();
            x.getResponseHeaders().add("Idmint-Node", name);
            Mode m = mode;
            if (m == Mode.HANG) {
                try {
                    released.await(); // until the test ends
                } catch (InterruptedException e) {
                    return;
                }
                return;
            }
            if (m == Mode.ERROR_500) {
                send(x, 500, "{\"error\":{\"code\":\"unavailable\",\"message\":\"store down\"}}");
                return;
            }
            if (m == Mode.RATE_LIMITED) {
                x.getResponseHeaders().add("Retry-After", "1");
                send(x, 429, "{\"error\":{\"code\":\"rate_limited\",\"message\":\"slow down\"}}");
                return;
            }
            String path = x.getRequestURI().getPath();
            String query = x.getRequestURI().getQuery();
            long count = 1;
            if (query != null && query.startsWith("count=")) {
                count = Long.parseLong(query.substring(6));
            }
            if (path.startsWith("/v1/decode/")) {
                send(x, 200, "{\"id\":\"" + path.substring(11) + "\",\"layout\":\"leaf\",\"time\":\"2026-12-02T20:28:58.405Z\",\"unix_ms\":\"1796243338405\",\"node\":3,\"sequence\":8,\"extra\":{\"dc\":1}}");
                return;
            }
            String[] parts = path.split("/");
            if (parts.length != 5 || !parts[1].equals("v1") || !parts[2].equals("keys")) {
                send(x, 404, "{\"error\":{\"code\":\"not_found\",\"message\":\"no route\"}}");
                return;
            }
            String key = parts[3];
            String strategy = cluster.strategies.get(key);
            if (strategy == null) {
                send(x, 404, "{\"error\":{\"code\":\"unknown_key\",\"message\":\"unknown key " + key + "\",\"field\":\"key\"}}");
                return;
            }
            x.getResponseHeaders().add("Idmint-Strategy", strategy);
            x.getResponseHeaders().add("Idmint-Key-Generation", generation);
            if (leader != null) {
                x.getResponseHeaders().add("Idmint-Leader", leader);
            }
            String auth = x.getRequestHeaders().getFirst("Authorization");
            lastAuth.put(key, auth == null ? "" : auth);
            String want = tokens.get(key);
            if (want != null && !("Bearer " + want).equals(auth)) {
                send(x, 401, "{\"error\":{\"code\":\"unauthorized\",\"message\":\"bad token\",\"field\":\"Authorization\"}}");
                return;
            }
            if (m == Mode.GARBAGE) {
                send(x, 200, "{\"key\":\"" + key + "\",\"ids\":[\"1\",");
                return;
            }
            AtomicLong ctr = cluster.counters.get(key);
            if (parts[4].equals("range")) {
                rangeRequests.incrementAndGet();
                if (!strategy.equals("segment") && !strategy.equals("monotonic")) {
                    send(x, 400, "{\"error\":{\"code\":\"unsupported\",\"message\":\"no ranges\",\"field\":\"key\"}}");
                    return;
                }
                long n = Math.min(count, rangeLimit);
                long first = ctr.getAndAdd(n);
                send(x, 200, "{\"key\":\"" + key + "\",\"first\":\"" + first + "\",\"last\":\"" + (first + n - 1) + "\",\"count\":" + n + "}");
                return;
            }
            idsRequests.incrementAndGet();
            if (count > 10000) {
                send(x, 400, "{\"error\":{\"code\":\"bad_count\",\"message\":\"count " + count + ": at most 10000\",\"field\":\"count\"}}");
                return;
            }
            StringBuilder b = new StringBuilder("{\"key\":\"" + key + "\",\"strategy\":\"" + strategy + "\",\"ids\":[");
            long first = ctr.getAndAdd(count);
            for (long i = 0; i < count; i++) {
                if (i > 0) {
                    b.append(',');
                }
                b.append('"').append(strategy.equals("uuid") ? UUID.randomUUID().toString() : Long.toString(first + i)).append('"');
            }
            send(x, 200, b.append("]}").toString());
        }
    }

    private static void send(HttpExchange x, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        x.getResponseHeaders().add("Content-Type", "application/json");
        x.sendResponseHeaders(status, b.length);
        try (OutputStream o = x.getResponseBody()) {
            o.write(b);
        }
    }
}
