package dev.idmint.client;

import java.util.List;
import java.util.Map;

/**
 * Stats is a snapshot of the client's counters.
 *
 * @param waits calls that found a buffer empty and waited for a refill (all keys)
 * @param refills refill requests that brought IDs (all keys)
 * @param failovers requests moved to another endpoint after a failure
 * @param hedges requests also sent to another endpoint after hedgeAfter without an answer
 * @param errors calls that threw
 * @param keys per key
 * @param endpoints per endpoint, in the order given
 */
public record Stats(long waits, long refills, long failovers, long hedges, long errors,
        Map<String, KeyStats> keys, List<EndpointStats> endpoints) {
}
