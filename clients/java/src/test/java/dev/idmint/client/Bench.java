package dev.idmint.client;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Bench measures the client without JMH (not packaged by Debian): warm-up,
 * several forks (fresh JVMs), and plain timing of many calls.
 *
 * <pre>
 * java -cp classes:test-classes dev.idmint.client.Bench memory [FORKS] [SECONDS]
 * java -cp classes:test-classes dev.idmint.client.Bench load ENDPOINTS KEY THREADS SECONDS
 * java -cp classes:test-classes dev.idmint.client.Bench mono ENDPOINTS KEY THREADS SECONDS
 * </pre>
 *
 * <b>memory</b>: next() from the buffer. Each fork starts a fake node in
 * its JVM with a segment key and a client that fetches ranges of 2^20 to
 * 2^24 IDs (the Go client's BenchmarkNext does the same with an
 * in-process endpoint), warms up, then times next() on one thread, on
 * two threads at once (ns per ID of the whole), next() through an
 * IdSource, and next(key, long[100]).
 *
 * <b>load</b>: end to end against real nodes: THREADS callers draw KEY flat
 * out for SECONDS (the rate reached is the capacity), then, with a new
 * client, at half that rate (each caller paced; one more than 10 ms
 * behind skips ahead instead of drawing its backlog flat out) after a 2 s
 * warm-up at that rate. It prints
 * the rates, the errors and the calls that waited for a refill in each.
 */
public final class Bench {
    public static void main(String[] a) throws Exception {
        switch (a.length == 0 ? "" : a[0]) {
            case "memory" -> memory(a.length > 1 ? Integer.parseInt(a[1]) : 3, a.length > 2 ? Integer.parseInt(a[2]) : 2);
            case "fork-memory" -> forkMemory(Integer.parseInt(a[1]));
            case "mono" -> mono(List.of(a[1].split(",")), a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]));
            case "load" -> load(List.of(a[1].split(",")), a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]));
            default -> {
                System.err.println("usage: Bench memory [FORKS] [SECONDS] | Bench load ENDPOINTS KEY THREADS SECONDS");
                System.exit(2);
            }
        }
    }

    private static void memory(int forks, int seconds) throws Exception {
        String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
        String cp = System.getProperty("java.class.path");
        List<String> lines = new ArrayList<>();
        for (int f = 0; f < forks; f++) {
            Process p = new ProcessBuilder(java, "-Dsun.net.httpserver.nodelay=true", "-cp", cp, Bench.class.getName(), "fork-memory", Integer.toString(seconds))
                    .redirectErrorStream(true).start();
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
                String l;
                while ((l = r.readLine()) != null) {
                    System.out.println("fork " + (f + 1) + ": " + l);
                    lines.add(l);
                }
            }
            if (p.waitFor() != 0) {
                throw new IllegalStateException("fork " + (f + 1) + " exited with " + p.exitValue());
            }
        }
        for (String name : new String[] {"next", "source", "parallel2", "nextN100"}) {
            double[] v = lines.stream().filter(l -> l.startsWith(name + " ")).mapToDouble(l -> Double.parseDouble(l.split(" ")[1])).sorted().toArray();
            if (v.length > 0) {
                System.out.printf("%-10s %.2f ns/op best, %.2f median of %d forks%n", name, v[0], v[v.length / 2], v.length);
            }
        }
    }

    private static volatile long sink;

    private static void forkMemory(int seconds) throws Exception {
        FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
        try (FakeNode n = new FakeNode("bench", cl);
                IdmintClient c = IdmintClient.builder(n.url()).batch(1 << 20, 1 << 24).build()) {
            c.next("order");
            IdSource src = c.source("order");
            long[] dst = new long[100];
            // Warm-up: every path the measurement takes, until the JIT settled.
            timeNext(c, seconds);
            timeSource(src, seconds);
            timeParallel(c, 2, seconds);
            timeN(c, dst, seconds);
            System.out.printf("next %.2f%n", timeNext(c, seconds));
            System.out.printf("source %.2f%n", timeSource(src, seconds));
            System.out.printf("parallel2 %.2f%n", timeParallel(c, 2, seconds));
            System.out.printf("nextN100 %.2f%n", timeN(c, dst, seconds));
            System.out.println("waits " + c.stats().waits() + " refills " + c.stats().refills());
        }
    }

    private static final int STEP = 1 << 20;

    private static double timeNext(IdmintClient c, int seconds) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds), ops = 0, x = 0, t0 = System.nanoTime();
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < STEP; i++) {
                x ^= c.next("order");
            }
            ops += STEP;
        }
        sink = x;
        return (double) (System.nanoTime() - t0) / ops;
    }

    private static double timeSource(IdSource s, int seconds) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds), ops = 0, x = 0, t0 = System.nanoTime();
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < STEP; i++) {
                x ^= s.next();
            }
            ops += STEP;
        }
        sink = x;
        return (double) (System.nanoTime() - t0) / ops;
    }

    private static double timeN(IdmintClient c, long[] dst, int seconds) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds), ops = 0, x = 0, t0 = System.nanoTime();
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < STEP / 100; i++) {
                c.next("order", dst);
                x ^= dst[99];
            }
            ops += STEP / 100;
        }
        sink = x;
        return (double) (System.nanoTime() - t0) / ops;
    }

    private static double timeParallel(IdmintClient c, int threads, int seconds) throws InterruptedException {
        AtomicLong ops = new AtomicLong();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        Thread[] ts = new Thread[threads];
        long t0 = System.nanoTime();
        for (int t = 0; t < threads; t++) {
            ts[t] = new Thread(() -> {
                long x = 0, n = 0;
                while (System.nanoTime() - end < 0) {
                    for (int i = 0; i < STEP; i++) {
                        x ^= c.next("order");
                    }
                    n += STEP;
                }
                ops.addAndGet(n);
                sink = x;
            });
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        return (double) (System.nanoTime() - t0) / ops.get();
    }

    /** mono: THREADS callers of next(KEY) on a monotonic key for SECONDS; calls/s and requests per call. */
    private static void mono(List<String> endpoints, String key, int threads, int seconds) throws Exception {
        try (IdmintClient c = IdmintClient.builder(endpoints).build()) {
            c.next(key);
            long[] r = drawFor(c, key, threads, seconds, 0);
            Stats s = c.stats();
            KeyStats k = s.keys().get(key);
            System.out.printf("monotonic: %d threads, %d s: %.0f calls/s, errors %d, %.4f requests per call, hedges %d, failovers %d, leader %s%n",
                    threads, seconds, (double) r[0] / seconds, r[1], (double) k.requests() / r[0], s.hedges(), s.failovers(), k.leader());
        }
    }

    private static void load(List<String> endpoints, String key, int threads, int seconds) throws Exception {
        double capacity;
        int refills = Integer.getInteger("idmint.maxRefills", 8); // -Didmint.maxRefills=N tries another maxRefills
        try (IdmintClient c = IdmintClient.builder(endpoints).timeout(Duration.ofSeconds(4)).maxRefills(refills).build()) {
            c.next(key);
            long[] r = drawFor(c, key, threads, seconds, 0);
            capacity = (double) r[0] / seconds;
            System.out.printf("flat out: %d threads, %d s: %.0f IDs/s (the capacity), errors %d, calls that waited for a refill %d%n",
                    threads, seconds, capacity, r[1], c.stats().keys().get(key).waits());
        }
        try (IdmintClient c = IdmintClient.builder(endpoints).timeout(Duration.ofSeconds(4)).maxRefills(refills).build()) {
            c.next(key);
            double half = capacity / 2;
            drawFor(c, key, threads, 2, half / threads); // warm up: learn the key and the rate, as the Go client's TestClusterDraw does
            long waitsBefore = c.stats().keys().get(key).waits();
            long[] r = drawFor(c, key, threads, seconds, half / threads);
            KeyStats k = c.stats().keys().get(key);
            System.out.printf("half capacity: %.0f of %.0f IDs/s asked, errors %d, calls that waited for a refill %d (after a 2 s warm-up at that rate; the longest wait since the client started %.1f ms)%n",
                    (double) r[0] / seconds, half, r[1], k.waits() - waitsBefore, k.waitMaxNanos() / 1e6);
            System.out.println("RESULT capacity=" + (long) capacity + " half=" + (long) half + " halfwaits=" + (k.waits() - waitsBefore) + " errors=" + r[1]);
        }
    }

    /** drawFor draws with threads callers for seconds, each at perThread IDs/s (0: flat out); returns {IDs, errors}. */
    private static long[] drawFor(IdmintClient c, String key, int threads, int seconds, double perThread) throws InterruptedException {
        AtomicLong total = new AtomicLong(), errors = new AtomicLong();
        long t0 = System.nanoTime(), end = t0 + TimeUnit.SECONDS.toNanos(seconds);
        long interval = perThread > 0 ? (long) (1e9 / perThread) : 0;
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            ts[t] = new Thread(() -> {
                IdSource s = c.source(key);
                long n = 0, x = 0, due = System.nanoTime();
                while (true) {
                    long now = System.nanoTime();
                    if (now - end >= 0) {
                        break;
                    }
                    if (interval > 0) {
                        if (now - due < 0) {
                            LockSupport.parkNanos(Math.min(due - now, 1_000_000)); // pacing
                            continue;
                        }
                        if (now - due > 10_000_000) {
                            due = now; // more than 10 ms behind: skip ahead, never a burst
                        }
                        due += interval;
                    }
                    try {
                        x ^= s.next();
                        n++;
                    } catch (IdmintException e) {
                        errors.incrementAndGet();
                    }
                }
                total.addAndGet(n);
                sink = x;
            });
            ts[t].start();
        }
        for (Thread t : ts) {
            t.join();
        }
        return new long[] {total.get(), errors.get()};
    }

    static String describe(double[] v) {
        return Arrays.toString(v);
    }
}
