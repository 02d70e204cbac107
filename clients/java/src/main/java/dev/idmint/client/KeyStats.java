package dev.idmint.client;

/**
 * KeyStats is one key's state and counters, as {@link IdmintClient#stats()} read them.
 *
 * @param key the key
 * @param strategy the key's strategy, null before the first answer
 * @param prefetched whether its IDs are fetched ahead of the draw (segment, snowflake, ticket, redis)
 * @param buffered IDs held
 * @param target the prefetch distance: IDs held or asked for ahead of the draw
 * @param drawRate the estimated draw, IDs per second
 * @param inFlight refill requests running
 * @param refills refill requests that brought IDs
 * @param refillErrors refill requests that failed
 * @param waits calls that found the buffer empty and waited for a refill
 * @param waitNanos their waiting in all
 * @param waitMaxNanos the longest wait
 * @param requests shared requests sent for calls of a key that is not prefetched
 * @param resets buffers dropped because the key changed on a server
 * @param leader the node answers named as the key's leader, or null
 */
public record KeyStats(String key, String strategy, boolean prefetched, long buffered, long target, double drawRate,
        int inFlight, long refills, long refillErrors, long waits, long waitNanos, long waitMaxNanos,
        long requests, long resets, String leader) {
}
