package dev.idmint.client;

/**
 * IdSource draws IDs of one key without looking the key up on each call:
 * {@code client.source("order")} once, then {@code next()} as often as
 * needed. It is thread-safe and as cheap as the client's own next().
 */
public final class IdSource {
    private final IdmintClient c;
    private final KeyState k;

    IdSource(IdmintClient c, KeyState k) {
        this.c = c;
        this.k = k;
    }

    /** The key. */
    public String key() {
        return k.name;
    }

    /** next returns one new ID; see {@link IdmintClient#next(String)}. */
    public long next() {
        if (c.closed) {
            throw new IdmintClosedException(k.name);
        }
        return k.next();
    }

    /** next fills dst with new IDs; see {@link IdmintClient#next(String, long[])}. */
    public void next(long[] dst) {
        if (c.closed) {
            throw new IdmintClosedException(k.name);
        }
        k.nextN(dst);
    }

    /** nextString returns one new ID as text; see {@link IdmintClient#nextString(String)}. */
    public String nextString() {
        return c.nextString(k.name);
    }
}
