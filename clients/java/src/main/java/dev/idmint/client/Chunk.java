package dev.idmint.client;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Chunk is one range or batch of IDs. Its value (it extends AtomicLong,
 * one indirection less on the hot path) is the index of the next ID to
 * hand out: whoever's getAndIncrement returns i &lt; n owns ID i, so each
 * is handed out once. Past n the chunk is used up.
 */
final class Chunk extends AtomicLong {
    private static final long serialVersionUID = 1L;

    static final Chunk EMPTY = new Chunk(0, 0, null);

    final long first; // a range: IDs first..first+n-1
    final long n;
    final long low; // the index whose taker checks the prefetch distance
    final long[] ids; // a batch: the IDs; null for a range

    Chunk(long first, long n, long[] ids) {
        this.first = first;
        this.n = n;
        this.low = n / 2;
        this.ids = ids;
    }

    long id(long i) {
        return ids == null ? first + i : ids[(int) i];
    }

    long left() {
        return Math.max(0, n - get());
    }
}
