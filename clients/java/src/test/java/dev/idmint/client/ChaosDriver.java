package dev.idmint.client;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * ChaosDriver draws IDs from real nodes for the Go test
 * clients/java/javatest, which kills and pauses the nodes meanwhile.
 *
 * <pre>
 * java -cp classes:test-classes dev.idmint.client.ChaosDriver ENDPOINTS SECONDS THREADS PER_THREAD_RATE SEG_KEY SEG_OUT MONO_KEY MONO_THREADS MONO_OUT FLAKE_KEY TEXT_KEY
 * </pre>
 *
 * First it draws a batch of FLAKE_KEY (a snowflake key), decodes one of
 * its IDs with the servers' decode route and draws TEXT_KEY (a text key)
 * as strings, and prints one "CHECK" line of what it got.
 *
 * THREADS callers draw SEG_KEY, each paced at PER_THREAD_RATE IDs/s, and
 * MONO_THREADS callers draw MONO_KEY as fast as it answers, for SECONDS.
 * SEG_OUT gets every segment ID (big-endian int64s); MONO_OUT every
 * monotonic call as three big-endian int64s: when it began and returned
 * (System.nanoTime since the start) and its ID. Stdout gets "READY" once
 * both keys answered, then one "RESULT" line of counters; a caller's
 * exception is printed and counted, never retried.
 */
public final class ChaosDriver {
    public static void main(String[] a) throws Exception {
        List<String> endpoints = List.of(a[0].split(","));
        long seconds = Long.parseLong(a[1]);
        int threads = Integer.parseInt(a[2]);
        long perRate = Long.parseLong(a[3]);
        String segKey = a[4], segOut = a[5], monoKey = a[6];
        int monoThreads = Integer.parseInt(a[7]);
        String monoOut = a[8];
        String flakeKey = a[9], textKey = a[10];

        try (IdmintClient c = IdmintClient.builder(endpoints).timeout(Duration.ofSeconds(10)).backoff(Duration.ofMillis(100), Duration.ofSeconds(1)).build()) {
            long[] flakes = new long[20_000];
            c.next(flakeKey, flakes);
            long distinct = Arrays.stream(flakes).distinct().count();
            Decoded d = c.decode(Long.toString(flakes[0]), null, flakeKey);
            List<String> texts = c.nextStrings(textKey, 3);
            String textErr = "";
            try {
                c.next(textKey);
            } catch (IdmintRequestException x) {
                textErr = x.code();
            }
            System.out.println("CHECK flakes=" + flakes.length + " distinct=" + distinct + " strategy=" + c.stats().keys().get(flakeKey).strategy()
                    + " decoded=" + d.id().equals(Long.toString(flakes[0])) + " layout=" + d.layout() + " unixms=" + d.unixMs() + " now=" + System.currentTimeMillis()
                    + " text=" + String.join(",", texts) + " nexttext=" + textErr);
            c.next(segKey);
            c.next(monoKey);
            System.out.println("READY");
            System.out.flush();
            long t0 = System.nanoTime();
            long end = t0 + TimeUnit.SECONDS.toNanos(seconds);
            AtomicLong errors = new AtomicLong();
            long cap = perRate * (seconds + 2);
            long[][] seg = new long[threads][];
            int[] segN = new int[threads];
            Thread[] ts = new Thread[threads + monoThreads];
            for (int t = 0; t < threads; t++) {
                int tt = t;
                seg[t] = new long[(int) cap];
                IdSource src = c.source(segKey);
                ts[t] = new Thread(() -> {
                    long[] ids = seg[tt];
                    int n = 0;
                    while (n < ids.length) {
                        long now = System.nanoTime();
                        if (now - end >= 0) {
                            break;
                        }
                        long due = (now - t0) * perRate / 1_000_000_000L; // IDs this caller should have drawn by now
                        if (n >= due) {
                            LockSupport.parkNanos(200_000); // pacing, not a wait for an event
                            continue;
                        }
                        try {
                            ids[n] = src.next();
                            n++;
                        } catch (IdmintException x) {
                            errors.incrementAndGet();
                            System.out.println("ERROR segment: " + x);
                        }
                    }
                    segN[tt] = n;
                });
            }
            long[][] mono = new long[monoThreads][];
            int[] monoN = new int[monoThreads];
            for (int t = 0; t < monoThreads; t++) {
                int tt = t;
                mono[t] = new long[3 * 1 << 16];
                ts[threads + t] = new Thread(() -> {
                    long[] ops = mono[tt];
                    int n = 0;
                    while (n + 3 <= ops.length && System.nanoTime() - end < 0) {
                        long s = System.nanoTime() - t0;
                        try {
                            long id = c.next(monoKey);
                            ops[n] = s;
                            ops[n + 1] = System.nanoTime() - t0;
                            ops[n + 2] = id;
                            n += 3;
                        } catch (IdmintException x) {
                            errors.incrementAndGet();
                            System.out.println("ERROR monotonic: " + x);
                        }
                    }
                    monoN[tt] = n;
                });
            }
            for (Thread t : ts) {
                t.start();
            }
            for (Thread t : ts) {
                t.join();
            }
            long total = 0;
            try (DataOutputStream o = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(segOut), 1 << 20))) {
                for (int t = 0; t < threads; t++) {
                    for (int i = 0; i < segN[t]; i++) {
                        o.writeLong(seg[t][i]);
                    }
                    total += segN[t];
                }
            }
            long calls = 0;
            try (DataOutputStream o = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(monoOut), 1 << 20))) {
                for (int t = 0; t < monoThreads; t++) {
                    for (int i = 0; i < monoN[t]; i++) {
                        o.writeLong(mono[t][i]);
                    }
                    calls += monoN[t] / 3;
                }
            }
            Stats s = c.stats();
            KeyStats mk = s.keys().get(monoKey);
            System.out.println("RESULT ids=" + total + " monocalls=" + calls + " errors=" + errors.get() + " clienterrors=" + s.errors()
                    + " waits=" + s.waits() + " refills=" + s.refills() + " failovers=" + s.failovers() + " hedges=" + s.hedges()
                    + " monorequests=" + (mk == null ? 0 : mk.requests()) + " endpoints=" + Arrays.toString(s.endpoints().toArray()));
        } catch (IOException x) {
            System.out.println("FATAL " + x);
            System.exit(2);
        }
    }
}
